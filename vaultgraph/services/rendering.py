"""Expressions render off the event loop, within a total budget per request.

A caller-written mask can take its whole per-render budget on every read; a page of such tokens
rendered on the event loop would stall every other request of every tenant. Pages whose masks
are caller-written render in a small thread pool instead, and all renders of one request share
one deadline (`render_budget` seconds): past it, each remaining masked field is withheld (as
for a mask that cannot be rendered), so one request costs at most its budget of CPU. Writes do
the same with the expressions they render (an id, a fingerprint, search indexes, a mask
checked against its bounds): past the budget the expression is refused.
Type-default masks and expressions are the service's own, cheap and bounded: they render
inline.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ..expressions.bounds import time_budget

T = TypeVar("T")


class Renderer:
    def __init__(self, *, workers: int, budget: float):
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers),
                                        thread_name_prefix="vaultgraph-render")
        self._budget = budget

    async def run(self, work: Callable[[], T]) -> T:
        """`work()` in the pool, under one deadline for the whole call."""
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, context.run, self._budgeted, work)

    def run_inline(self, work: Callable[[], T]) -> T:
        """`work()` on the calling thread, under the same one deadline: for work whose only
        expressions are the service's own (a type's defaults), cheap and bounded, which a
        single request renders inline too; the hop to the pool would cost more than it."""
        return self._budgeted(work)

    async def run_where(self, caller_written: bool, work: Callable[[], T]) -> T:
        """`run` for work that renders an expression a caller wrote, else `run_inline`."""
        if caller_written:
            return await self.run(work)
        return self.run_inline(work)

    def _budgeted(self, work: Callable[[], T]) -> T:
        with time_budget(self._budget):
            return work()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
