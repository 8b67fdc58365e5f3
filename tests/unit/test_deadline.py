"""`deadline.timeout_at`: asyncio's `timeout_at`, with one timer for all of a loop's deadlines.
A block past its deadline ends in `TimeoutError`; any other cancellation stays a
`CancelledError`; a block due earlier than the one armed is not kept waiting for it; a block
that ended is never cancelled later."""

from __future__ import annotations

import asyncio

import pytest

from vaultgraph import deadline
from vaultgraph.deadline import timeout_at


def now() -> float:
    return asyncio.get_running_loop().time()


def shared_timer() -> deadline._SharedTimer:
    timer = deadline._loop_timer.timer
    assert timer is not None and timer.loop is asyncio.get_running_loop()
    return timer


async def test_a_block_past_its_deadline_raises_timeout_error():
    began = now()
    with pytest.raises(TimeoutError):
        async with timeout_at(began + 0.05):
            await asyncio.sleep(5)
    assert 0.04 <= now() - began < 1.0
    assert asyncio.current_task().cancelling() == 0  # the cancellation was taken back


async def test_a_block_that_ends_in_time_returns_its_result_and_leaves_the_set():
    async with timeout_at(now() + 5):
        await asyncio.sleep(0)
        result = 7
    assert result == 7
    assert shared_timer().blocks == set()


async def test_a_deadline_already_past_cancels_at_the_first_wait():
    with pytest.raises(TimeoutError):
        async with timeout_at(now() - 1):
            await asyncio.sleep(1)


async def test_an_earlier_deadline_is_not_kept_waiting_for_a_later_armed_one():
    # The loop's timer is armed for the first block's deadline, 30 s away; the second block's,
    # due in 50 ms, must re-arm it.
    outcomes: list[str] = []

    async def slow() -> None:
        async with timeout_at(now() + 30):
            await asyncio.sleep(0.3)
        outcomes.append("slow done")

    async def fast() -> None:
        try:
            async with timeout_at(now() + 0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            outcomes.append("fast timed out")

    began = now()
    await asyncio.gather(slow(), fast())
    assert outcomes == ["fast timed out", "slow done"]
    assert now() - began < 1.0


async def test_blocks_share_one_timer_and_each_times_out_at_its_own_deadline():
    began = now()
    ended: dict[int, float] = {}

    async def block(n: int) -> None:
        try:
            async with timeout_at(began + 0.05 * n):
                await asyncio.sleep(5)
        except TimeoutError:
            ended[n] = now() - began

    await asyncio.gather(*(block(n) for n in (3, 1, 2)))
    assert sorted(ended) == [1, 2, 3]
    assert ended[1] < ended[2] < ended[3] < 1.0
    # (uvloop fires a timer up to half its millisecond clock early, as it does asyncio's.)
    assert all(ended[n] >= 0.05 * n - 0.0005 for n in ended)


async def test_a_block_due_just_after_another_is_not_expired_with_it():
    began = now()
    ended: list[float] = []

    async def block(when: float) -> None:
        try:
            async with timeout_at(when):
                await asyncio.sleep(5)
        except TimeoutError:
            ended.append(now())

    await asyncio.gather(block(began + 0.05), block(began + 0.0509))
    assert len(ended) == 2
    assert ended[1] >= began + 0.0509 - 0.0005  # not with the first, 0.9 ms before its own


async def waiting_in_a_block() -> asyncio.Task:
    """A task waiting inside a block due in 30 s, once it has entered it."""
    entered = asyncio.Event()

    async def waits() -> None:
        async with timeout_at(now() + 30):
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(waits())
    await entered.wait()
    return task


async def test_a_cancellation_from_elsewhere_stays_a_cancellation():
    task = await waiting_in_a_block()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert shared_timer().blocks == set()


async def test_an_outer_cancellation_during_an_expiry_is_not_swallowed():
    # The block's deadline and an outer cancel arrive together: the outer one wins, as with
    # asyncio's timeouts (the caller asked for the task to stop).
    task = await waiting_in_a_block()
    timer = shared_timer()
    [block] = timer.blocks
    block.when = now() - 1  # due: the timer's callback, called as the loop would, expires it
    timer._fire()
    task.cancel()  # and before the task runs again, someone else cancels it
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_block_that_ended_is_not_cancelled_at_its_deadline():
    async with timeout_at(now() + 0.05):
        pass
    await asyncio.sleep(0.1)  # past the deadline: the timer fires with nothing due
    assert asyncio.current_task().cancelling() == 0
    await asyncio.sleep(0)  # not cancelled


async def test_nested_blocks_the_inner_deadline_times_out_the_inner_block_only():
    async with timeout_at(now() + 5):
        with pytest.raises(TimeoutError):
            async with timeout_at(now() + 0.05):
                await asyncio.sleep(5)
        await asyncio.sleep(0.01)  # the outer block goes on
    with pytest.raises(TimeoutError):
        async with timeout_at(now() + 0.05):
            async with timeout_at(now() + 5):
                await asyncio.sleep(5)

