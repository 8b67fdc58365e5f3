"""The stall monitor (vaultgraph/stall_monitor.py): a blocked event loop and a garbage collection
each show in their histogram; stopping it unhooks it from the collector."""

from __future__ import annotations

import asyncio
import gc
import time

from prometheus_client import REGISTRY

from vaultgraph.stall_monitor import StallMonitor

LAG = "vaultgraph_event_loop_lag_seconds"
GC_PAUSE = "vaultgraph_python_gc_pause_seconds"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def lags_over_a_tenth() -> float:
    return sample(f"{LAG}_count") - sample(f"{LAG}_bucket", le="0.1")


async def test_a_blocked_loop_is_seen_as_lag():
    monitor = StallMonitor(interval=0.05)
    monitor.start()
    try:
        await asyncio.sleep(0)  # the monitor's first sleep begins
        ticks, over = sample(f"{LAG}_count"), lags_over_a_tenth()
        time.sleep(0.3)  # noqa: ASYNC251 - the stall under test
        await asyncio.sleep(0.02)
        # Its timer was due 0.05 s after it slept and ran once the loop was free: 0.25 s late.
        assert lags_over_a_tenth() - over >= 1
        await asyncio.sleep(0.2)
        assert sample(f"{LAG}_count") - ticks >= 3  # it goes on ticking, unblocked
    finally:
        await monitor.stop()


async def test_collections_are_timed_by_generation_and_stop_unhooks_the_monitor():
    monitor = StallMonitor(interval=0.05)
    monitor.start()
    try:
        full = sample(f"{GC_PAUSE}_count", generation="2")
        young = sample(f"{GC_PAUSE}_count", generation="0")
        gc.collect()
        gc.collect(0)
        await asyncio.sleep(0.12)  # the next tick moves them into the histogram
        assert sample(f"{GC_PAUSE}_count", generation="2") - full >= 1
        assert sample(f"{GC_PAUSE}_count", generation="0") - young >= 1
        assert sample(f"{GC_PAUSE}_sum", generation="2") > 0
    finally:
        await monitor.stop()
    assert monitor._on_gc not in gc.callbacks
    after = sample(f"{GC_PAUSE}_count", generation="2")
    gc.collect()
    monitor.flush()
    assert sample(f"{GC_PAUSE}_count", generation="2") == after


async def test_a_collection_timed_at_stop_is_not_lost():
    monitor = StallMonitor(interval=60)  # no tick during the test: stop() flushes
    monitor.start()
    before = sample(f"{GC_PAUSE}_count", generation="1")
    gc.collect(1)
    await monitor.stop()
    assert sample(f"{GC_PAUSE}_count", generation="1") - before >= 1
