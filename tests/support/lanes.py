"""What the tests of statements written or read together (repository/coalesce.py) share: a
lane held while requests are sent, and the histogram of rows a statement held."""

from __future__ import annotations

import asyncio
import contextlib

from prometheus_client import REGISTRY


def batches(histogram: str) -> tuple[float, float]:
    """Statements of `histogram` (e.g. vaultgraph_creates_written_together) so far, and the
    rows they held."""
    return (REGISTRY.get_sample_value(f"{histogram}_count") or 0.0,
            REGISTRY.get_sample_value(f"{histogram}_sum") or 0.0)


async def waiting(lanes, count: int) -> None:
    """Until `count` calls wait on `lanes` (a coalesce.py `_Lanes`)."""
    for _ in range(200):
        if len(lanes._waiting) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{count} calls never waited")


@contextlib.asynccontextmanager
async def lane_held(lanes, count: int):
    """`lanes`' one lane is busy while the block runs; on leaving, once `count` calls wait, it
    is handed on as a statement ending hands it on."""
    assert lanes._busy == 0
    lanes._busy = 1
    try:
        yield
        await waiting(lanes, count)
        assert len(lanes._waiting) == count
    finally:
        lanes._next()
