"""The benchmark's load generator runner: an interrupted harness leaves no wrk behind."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.loadgen import run_wrk


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
