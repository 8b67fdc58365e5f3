"""Resource bounds: every filter call is limited in the size it takes and makes, and a render
in time (`check_time`)."""

from __future__ import annotations

import functools
import gc
import threading
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from liquid import is_undefined

from .errors import (
    MAX_INT_BITS,
    MAX_RENDER_SECONDS,
    MAX_VALUE_SIZE,
    ExpressionLimitError,
)
from .filters import as_text

# --- resource bounds -----------------------------------------------------------------------

# A render's time is the CPU its own thread spends rendering. Not counted: waiting (a busy
# machine, the GIL, another thread's work: the clock moves, this thread's CPU does not) and
# the cyclic garbage collector, which runs in whichever thread's allocation crosses its
# threshold, walks every tracked object of the process (a full collection on a large heap, and
# the finalizers of what it frees, take tenths of a second) and is the process's work, not the
# expression's. What an expression allocates is bounded per filter call (sizes, loop
# iterations), and its own work, counted, grows with what it allocates: an expensive one is
# still stopped by what it spends itself.


class _CollectorTime(threading.local):
    """This thread's CPU seconds spent in the cyclic garbage collector (callbacks and
    finalizers included)."""

    spent = 0.0
    began: float | None = None


_collector = _CollectorTime()


def _on_collection(phase: str, info: dict[str, int]) -> None:
    """A `gc.callbacks` hook, called by the collecting thread before and after each collection."""
    if phase == "start":
        _collector.began = time.thread_time()
    elif _collector.began is not None:
        _collector.spent += time.thread_time() - _collector.began
        _collector.began = None


# First, so the other hooks' work at the start of a collection counts as the collector's.
gc.callbacks.insert(0, _on_collection)


def own_cpu() -> float:
    """This thread's CPU time, in seconds, outside the garbage collector."""
    return time.thread_time() - _collector.spent


# (on the clock, in this thread's own CPU time (`own_cpu`), the thread whose CPU time that is)
_deadline: ContextVar[tuple[float, float, int] | None] = ContextVar("expression_deadline",
                                                                    default=None)


class time_budget:
    """A deadline for everything rendered inside: `seconds` from now, or the deadline already in
    force when that ends sooner (a mask's leaves share the mask's; a request's total budget,
    set around all its renders, caps each one). A class rather than a generator: it is entered
    on every render.

    The thread's CPU clock is read when the budget is entered, not at the first check: a
    render that waited before its first filter call (a busy machine) must not have the wait
    counted against it."""

    __slots__ = ("_seconds", "_token")

    def __init__(self, seconds: float = MAX_RENDER_SECONDS):
        self._seconds = seconds
        self._token = None

    def __enter__(self) -> None:
        outer = _deadline.get()
        mine = time.monotonic() + self._seconds
        if outer is None or outer[0] > mine:
            self._token = _deadline.set((mine, own_cpu() + self._seconds,
                                         threading.get_ident()))

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _deadline.reset(self._token)
            self._token = None


def _past(deadline: tuple[float, float, int]) -> bool:
    """Past the budget: on the clock (cheap, checked first), and in the CPU this thread has
    used outside the garbage collector (`own_cpu`), when the budget was set in this thread. A
    render that waited (a busy machine, a collection in another thread, the GIL) or in which
    the collector ran has not spent its budget until it has used that much CPU itself: under
    load or a full collection, a cheap expression is not refused as too expensive."""
    wall, cpu, thread = deadline
    if time.monotonic() <= wall:
        return False
    return threading.get_ident() != thread or own_cpu() > cpu


def check_time() -> None:
    """`ExpressionLimitError` when the render in force is past its budget (`_past`). Called
    by every filter call, every variable a template reads and every loop iteration
    (expressions/__init__.py): an expression's costly work needs one of them, so a render
    is stopped within one step of its budget, with or without filters."""
    deadline = _deadline.get()
    if deadline is not None and _past(deadline):
        raise ExpressionLimitError()


def _measure(value: Any, budget: int = MAX_VALUE_SIZE) -> tuple[int, int]:
    """(size, leaf items) of a value; size is past `budget` as soon as the walk knows it is."""
    size = items = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item)
            items += 1
        elif isinstance(item, bool) or item is None or isinstance(item, float):
            size += 1
            items += 1
        elif isinstance(item, int):
            if item.bit_length() > MAX_INT_BITS:
                return budget + 1, items
            size += item.bit_length() // 8 + 1
            items += 1
        elif isinstance(item, range):
            size += len(item)
            items += len(item)
        elif isinstance(item, list | tuple):
            size += len(item) + 1
            if size <= budget:
                stack.extend(item)
        elif isinstance(item, Mapping) and not is_undefined(item):
            size += len(item) + 1
            items += 1
            if size <= budget:
                stack.extend(item.keys())
                stack.extend(item.values())
        else:  # Undefined, Liquid's own objects
            size += 1
            items += 1
        if size > budget:
            return size, items
    return size, items


def _too_big(value: Any) -> bool:
    if type(value) is str:  # most filters take and make text: its size is its length
        return len(value) > MAX_VALUE_SIZE
    return _measure(value)[0] > MAX_VALUE_SIZE


def _joined_size(value: Any, separator: Any = " ", *_: Any, **__: Any) -> int:
    size, items = _measure(value)
    return size + items * len(as_text(separator))


def _replaced_size(value: Any, old: Any = "", new: Any = "", *_: Any, **__: Any) -> int:
    text, old, new = as_text(value), as_text(old), as_text(new)
    found = len(text) + 1 if old == "" else text.count(old)
    return len(text) + found * max(0, len(new) - len(old))


# Filters whose result can be the product of two inputs' sizes: estimated before they run.
_PRODUCT_SIZE: dict[str, Callable[..., int]] = {"join": _joined_size, "replace": _replaced_size}
# Keyword arguments Liquid itself passes to filters that ask for them.
_LIQUID_KWARGS = ("context", "environment")


def bounded_filter(name: str, func: Callable) -> Callable:
    product_size = _PRODUCT_SIZE.get(name)

    @functools.wraps(func)  # keeps Liquid's with_context / with_environment marks
    def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
        check_time()
        # Text, what most filters take and make, is measured inline: a mask renders this for
        # every token of a page.
        if (len(value) > MAX_VALUE_SIZE if type(value) is str else _too_big(value)) or (
                args and any(_too_big(v) for v in args)) or (kwargs and any(
                _too_big(v) for k, v in kwargs.items() if k not in _LIQUID_KWARGS)):
            raise ExpressionLimitError()
        if product_size is not None and product_size(value, *args) > MAX_VALUE_SIZE:
            raise ExpressionLimitError()
        result = func(value, *args, **kwargs)
        if len(result) > MAX_VALUE_SIZE if type(result) is str else _too_big(result):
            raise ExpressionLimitError()
        return result

    return bounded

