"""A request's database time: one budget (`VAULTGRAPH_REQUEST_TIMEOUT` in all, retries
included) set once when a protected request starts (api/middleware.py `audit`) and drawn on by
every statement and transaction the request runs (repository/database.py), and by the wait
for its audit event. Here, outside the layers, so every layer may read it: the HTTP layer sets
it, storage spends it."""

from __future__ import annotations

import asyncio
import contextvars


class Budget:
    """What is left of a request's database time (`VAULTGRAPH_REQUEST_TIMEOUT` in all): each
    statement or transaction may take what remains, and what it took is spent. Time the request
    spends elsewhere (its body arriving, rendering) is not database time."""

    __slots__ = ("remaining",)

    def __init__(self, seconds: float):
        self.remaining = seconds


# The current request's database time; None (outside a request): `timeout` per statement.
deadline: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("deadline", default=None)


class request_deadline:
    """All the database work inside (statements, transactions, their retries) shares one
    budget of `seconds`: a request's `VAULTGRAPH_REQUEST_TIMEOUT` in all. The budget is
    returned on entry: what is left of it after the block bounds the wait for the request's
    audit event (api/middleware.py). A class, not a generator: every protected request enters
    one."""

    __slots__ = ("_seconds", "_token")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    def __enter__(self) -> Budget:
        budget = Budget(self._seconds)
        self._token = deadline.set(budget)
        return budget

    def __exit__(self, *exc: object) -> None:
        deadline.reset(self._token)


class spending:
    """Charge the time inside to the current request's database budget, if any. A class, not
    a generator: every statement enters one."""

    __slots__ = ("_budget", "_started")

    def __init__(self) -> None:
        self._budget = deadline.get()

    def __enter__(self) -> None:
        if self._budget is not None:
            self._started = asyncio.get_running_loop().time()

    def __exit__(self, *exc: object) -> bool:
        if self._budget is not None:
            self._budget.remaining -= asyncio.get_running_loop().time() - self._started
        return False
