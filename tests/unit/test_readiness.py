"""Requests that arrive before start-up is done wait for it (api/middleware.py `audit`): the
wait ends when start-up does, when its time is up, or when the process starts to drain."""

from __future__ import annotations

import asyncio

from vaultgraph.services.health import Readiness


async def test_a_wait_ends_when_start_up_does():
    readiness = Readiness(None)
    readiness.started = False
    waiting = asyncio.create_task(readiness.wait_started(30))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    readiness.started = True
    assert await asyncio.wait_for(waiting, 1) is True


async def test_a_wait_ends_false_when_its_time_is_up():
    readiness = Readiness(None)
    readiness.started = False
    assert await readiness.wait_started(0.05) is False
    assert str(readiness.not_serving()) == "The service is starting."


async def test_a_drain_ends_the_waits_for_a_start_up_that_will_not_finish():
    readiness = Readiness(None)
    readiness.started = False
    waiting = asyncio.create_task(readiness.wait_started(30))
    await asyncio.sleep(0.01)
    readiness.drain()
    assert await asyncio.wait_for(waiting, 1) is False  # at once, not after 30 s
    assert str(readiness.not_serving()) == "The service is shutting down."
    assert await readiness.wait_started(30) is False
