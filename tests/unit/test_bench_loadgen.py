"""The benchmark's load generator runner: an interrupted harness leaves no wrk behind."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from aiohttp import web

from bench.loadgen import Pacer, Wrk, run_bare, run_wrk
from bench.workloads import Request


def _running(pid: int) -> bool:
    """Whether the process exists and is not a zombie waiting to be reaped."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or during the read
        return False
    return "\nState:\tZ" not in status


async def test_a_cancelled_run_kills_the_load_generator(tmp_path):
    pid_file = tmp_path / "pid"
    # A stand-in for wrk that would run for a minute: it writes its pid, then sleeps.
    argv = [sys.executable, "-c",
            f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
            "time.sleep(60)"]
    run = asyncio.ensure_future(run_wrk(argv, {}))
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    assert _running(pid)
    run.cancel()
    try:
        await run
    except asyncio.CancelledError:
        pass
    for _ in range(100):
        if not _running(pid):
            break
        await asyncio.sleep(0.05)
    assert not _running(pid)


async def test_a_finished_run_is_parsed_with_its_environment():
    # A stand-in for wrk printing the summary line the Lua scripts print, from the variable the
    # runner passed it.
    line = ('BENCH_JSON {"requests": 7, "connect": 0, "read": 0, "write": 0, "status": 1, '
            '"timeout": 0, "duration_us": 2000000, "p50": 1500, "p99": 3000, "p999": 4000}')
    result = await run_wrk([sys.executable, "-c", "import os; print(os.environ['BENCH_LINE'])"],
                           {"BENCH_LINE": line})
    assert (result.requests, result.errors, result.seconds, result.p50_ms) == (7, 1, 2.0, 1.5)


async def test_a_failed_run_raises_with_its_output():
    with pytest.raises(RuntimeError, match=r"wrk failed \(3\): no wrk here"):
        await run_wrk([sys.executable, "-c", "import sys; print('no wrk here'); sys.exit(3)"],
                      {})


class _Clock:
    """The pacer's clock and sleep, moved only by the sleeps it asks for and by `pause`: the
    schedule is checked exactly, whatever else the machine is busy with (a real clock moved on
    between two callers of a gather on a loaded machine, and the next slot was "now")."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def pause(self, seconds: float) -> None:
        self.now += seconds


async def test_the_pacer_hands_out_slots_one_interval_apart_and_never_in_the_past(monkeypatch):
    import types

    from bench import loadgen

    clock = _Clock()
    monkeypatch.setattr(loadgen, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(loadgen, "asyncio", types.SimpleNamespace(sleep=clock.sleep))
    pacer = Pacer(1000.0)
    began = clock.now
    slots = await asyncio.gather(*(pacer.wait() for _ in range(20)))
    # 20 callers at once: each gets the next slot, 1 ms after the one before, and sleeps to it.
    assert slots == pytest.approx([began + 0.001 * i for i in range(20)], abs=1e-9)
    assert clock.sleeps == pytest.approx([0.001] * 19, abs=1e-9)
    assert clock.now == pytest.approx(slots[-1], abs=1e-9)
    # A caller after a pause gets "now", not the missed slots: the schedule never bursts.
    clock.pause(0.05)
    before = clock.now
    late = await pacer.wait()
    assert late == before
    assert await pacer.wait() - late == pytest.approx(0.001, abs=1e-9)


async def test_no_rate_does_not_wait():
    pacer = Pacer(0.0)
    scheduled = pacer.next
    before = time.monotonic()
    for _ in range(1000):
        now = await pacer.wait()
    assert now >= before
    # no slot was handed out, and a thousand waits took no sleeping (well under 1 s)
    assert pacer.next == scheduled
    assert time.monotonic() - before < 0.5


async def test_the_bare_loop_holds_its_rate_below_what_it_could_do():
    async def op(_):
        await asyncio.sleep(0)

    free = await run_bare(op, [1], 8, 0.5)
    paced = await run_bare(op, [1], 8, 1.0, rate=100.0)
    assert free.requests > 1000
    assert 90 <= paced.requests <= 102


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is installed by make bench")
async def test_wrk_holds_its_rate_through_the_pool_script(tmp_path):
    async def answer(request):
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/x", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        wrk = Wrk(shutil.which("wrk"), f"http://127.0.0.1:{port}", "key", 8, 1, tmp_path)
        free = await wrk.run([Request("GET", "/x")], 1)
        paced = await wrk.run([Request("GET", "/x")], 2, rate=150.0)
    finally:
        await runner.cleanup()
    assert free.requests > 1000
    # 300 on schedule; fewer if the machine is busy. wrk's window can run past its 2 s (2.1 s
    # on a busy machine): the schedule holds over the window it measured, a slot at most early
    # for each of the 8 connections.
    assert 240 <= paced.requests <= 150 * paced.seconds + 8
    assert paced.errors == 0
