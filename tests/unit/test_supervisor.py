"""`vaultgraph serve --workers N` as a supervisor: its exit status and the metrics directory its
workers share (docs/operations.md, docs/observability.md)."""

from __future__ import annotations

import signal
import subprocess

import pytest

from vaultgraph import metrics, server
from vaultgraph.settings import ConfigError, Settings

KILLED = "sleep 0.3; kill -9 $$"  # the OOM killer, or kill -9
DRAINS = "trap 'exit 0' TERM; while :; do sleep 0.05; done"  # exits 0 on SIGTERM


@pytest.fixture
def workers(monkeypatch):
    """Workers that run the given shell scripts instead of `python -m vaultgraph.server`."""
    scripts: list[str] = []
    real = subprocess.Popen

    def popen(_argv, env=None, pass_fds=()):
        return real(["sh", "-c", scripts.pop(0)], env=env, pass_fds=pass_fds)

    monkeypatch.setattr(server.subprocess, "Popen", popen)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield scripts
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_a_worker_killed_by_a_signal_makes_the_supervisor_fail(workers):
    workers.extend([KILLED, DRAINS])
    assert server._supervise(Settings(workers=2), 2) == 128 + signal.SIGKILL


def test_the_worst_exit_status_wins(workers):
    workers.extend(["exit 1", DRAINS])
    assert server._supervise(Settings(workers=2), 2) == 1
    workers.extend(["exit 0", "exit 0"])
    assert server._supervise(Settings(workers=2), 2) == 0


def test_prepare_dir_removes_only_the_metrics_files(tmp_path):
    shared = tmp_path / "metrics"
    shared.mkdir()
    (shared / "counter_123.db").write_bytes(b"x")
    (shared / "gauge_livesum_123.db").write_bytes(b"x")
    metrics.prepare_dir(shared)
    assert list(shared.iterdir()) == []
    metrics.prepare_dir(tmp_path / "new" / "dir")
    assert (tmp_path / "new" / "dir").is_dir()


def test_prepare_dir_refuses_a_directory_holding_anything_else(tmp_path):
    (tmp_path / "kek").write_text("k1:…")
    (tmp_path / "neo4j").mkdir()
    (tmp_path / "counter_1.db").write_bytes(b"x")
    with pytest.raises(ConfigError) as caught:
        metrics.prepare_dir(tmp_path)
    assert (caught.value.cause, caught.value.fix) == (
        f"VAULTGRAPH_METRICS_DIR {tmp_path} holds other files than metrics (kek, neo4j)",
        "set VAULTGRAPH_METRICS_DIR to a directory of its own (new or empty)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter_1.db", "kek", "neo4j"]


def tell(message: str) -> str:
    """A worker script's line to its supervisor (on the pipe it inherited)."""
    return f"printf '{message}\\n' > /dev/fd/${server.SUPERVISOR_FD}"


def test_the_banner_waits_for_every_worker_and_a_line_is_printed_once(workers, capfd):
    workers.extend([f"{tell('say vaultgraph: refused')}; exit 1",
                    f"{tell('ready')}; {tell('say vaultgraph: refused')}; {DRAINS}"])
    assert server._supervise(Settings(workers=2), 2, banner="serving on here") == 1
    assert capfd.readouterr().err == "vaultgraph: refused\n"
    workers.extend([f"{tell('ready')}; exit 0", f"{tell('ready')}; exit 0"])
    assert server._supervise(Settings(workers=2), 2, banner="serving on here") == 0
    assert capfd.readouterr().err == "serving on here\n"
    workers.extend([f"{tell('ready')}; exit 0", "exit 0"])  # one never started: no banner
    assert server._supervise(Settings(workers=2), 2, banner="serving on here") == 0
    assert capfd.readouterr().err == ""


def test_a_later_worker_failing_stops_the_first(workers):
    workers.extend([DRAINS, "exit 1"])
    assert server._supervise(Settings(workers=2), 2) == 1
