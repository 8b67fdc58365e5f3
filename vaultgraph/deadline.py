"""A request's database time: one budget (`VAULTGRAPH_REQUEST_TIMEOUT` in all, retries
included) set once when a protected request starts (api/middleware.py `audit`) and drawn on by
every statement and transaction the request runs (repository/database.py), and by the wait
for its audit event. Here, outside the layers, so every layer may read it: the HTTP layer sets
it, storage spends it."""

from __future__ import annotations

import asyncio
import contextvars
import threading


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


class timeout_at:
    """`asyncio.timeout_at(when)`, with one timer for all of a loop's deadlines: the block is
    cancelled at `when` and `TimeoutError` raised from it, and a cancellation from anywhere
    else stays a `CancelledError`, as asyncio's. Every statement and every wait for a batch
    enters one, and asyncio's arms and cancels a timer of its own each time (under uvloop a
    libuv timer made, started, stopped and closed: about 4 µs a block, by `timeit`). Here a block
    only joins its loop's set of deadlines: the loop's one timer is armed at the earliest of
    them, re-armed only for a block due earlier, and when it fires it cancels the blocks past
    their deadline and waits for the earliest left. Deadlines are a request's budget ahead,
    almost always later than the one armed, and most blocks end well before them, so the timer
    is re-armed about once a budget, not once a block."""

    __slots__ = ("_cancelling", "_expired", "_task", "_timer", "when")

    def __init__(self, when: float) -> None:
        self.when = when

    async def __aenter__(self) -> timeout_at:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("timeout_at must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._expired = False
        timer = _loop_timer.timer
        loop = asyncio.get_running_loop()
        if timer is None or timer.loop is not loop:
            timer = _loop_timer.timer = _SharedTimer(loop)
        self._timer = timer
        timer.add(self)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: object) -> None:
        self._timer.blocks.discard(self)
        if self._expired and self._task.uncancel() <= self._cancelling \
                and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def _expire(self) -> None:
        self._expired = True
        self._task.cancel()


class _SharedTimer:
    """One loop's deadlines (the blocks of `timeout_at` it runs) and its one timer."""

    __slots__ = ("_armed_at", "_handle", "blocks", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.blocks: set[timeout_at] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = 0.0

    def add(self, block: timeout_at) -> None:
        self.blocks.add(block)
        if self._handle is None or block.when < self._armed_at:
            self._arm(block.when)

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed_at = when
        self._handle = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        if not self.blocks:
            return
        # The block it was armed for is due even if the loop fired a little early (uvloop
        # rounds to its millisecond clock); no other block is expired before its deadline.
        due_by = max(self.loop.time(), self._armed_at)
        due = [block for block in self.blocks if block.when <= due_by]
        for block in due:
            self.blocks.discard(block)
            block._expire()
        if self.blocks:
            self._arm(min(block.when for block in self.blocks))


class _LoopTimer(threading.local):
    timer: _SharedTimer | None = None


# The shared timer of the loop running in this thread (a thread runs one loop at a time).
_loop_timer = _LoopTimer()
