"""What stops a serving process from answering: the event loop running late, and Python's
garbage collector (docs/observability.md, the `vaultgraph_event_loop_lag_seconds` and
`vaultgraph_python_gc_pause_seconds` histograms).

A request in flight waits whenever its process's event loop cannot run callbacks: a handler
doing CPU work, a garbage collection, or the kernel giving the process's core to another. One
worker's stall delays every request it holds, so a tail of slow answers often starts here.
`StallMonitor` sleeps `interval` seconds at a time and records how much later than asked it
woke (the loop's lag), and times every collection from `gc.callbacks`.

The collector's callback only appends to a bounded buffer: prometheus-client guards its values
with non-reentrant locks, and a collection can start while this very thread holds one (any
allocation can trigger it), so the callback must not touch a metric. The monitor moves the
buffered pauses into the histogram on its next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections import deque

from . import metrics

DEFAULT_INTERVAL = 0.1
GC_BUFFER = 4_096  # pauses held between two ticks; beyond it the oldest are dropped


class StallMonitor:
    def __init__(self, interval: float = DEFAULT_INTERVAL) -> None:
        self.interval = interval
        self._pauses: deque[tuple[int, float]] = deque(maxlen=GC_BUFFER)
        self._started: float | None = None
        self._task: asyncio.Task | None = None

    def _on_gc(self, phase: str, info: dict) -> None:
        # Runs inside the collector: no allocation beyond one tuple, no lock, no metric.
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self._pauses.append((info["generation"], time.perf_counter() - self._started))
            self._started = None

    def start(self) -> None:
        if self._task is None:
            gc.callbacks.append(self._on_gc)
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                name="stall-monitor")

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        self.flush()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time() + self.interval
            await asyncio.sleep(self.interval)
            metrics.EVENT_LOOP_LAG.observe(max(0.0, loop.time() - asked))
            self.flush()

    def flush(self) -> None:
        """Move the collections timed since the last call into the histogram."""
        while self._pauses:
            generation, seconds = self._pauses.popleft()
            metrics.GC_PAUSE.labels(str(generation)).observe(seconds)
