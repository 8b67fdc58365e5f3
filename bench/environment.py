"""What a run starts and stops: its own Neo4j (fresh data each run) and the service process."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from vaultgraph.crypto import KeyRing
from vaultgraph.neo4j_local import ENTRY_POINT, LocalNeo4j
from vaultgraph.settings import workers_beside_neo4j

from . import stalls
from .config import ROOT, BenchConfig

# On the service's PYTHONPATH, switches its audit trail off (bench/unaudited/sitecustomize.py).
UNAUDITED = Path(__file__).resolve().parent / "unaudited"
# On the service's PYTHONPATH, its answers stop waiting for their audit events' commit
# (bench/audit_unwaited/sitecustomize.py; `python -m bench.defaults_ab`'s `audit-unwaited`).
UNWAITED = Path(__file__).resolve().parent / "audit_unwaited"


def first_on_path(folder: str | Path, path: str | None) -> str:
    """A PYTHONPATH with `folder` ahead of `path` (a process's own, or none)."""
    return os.pathsep.join(filter(None, [str(folder), path]))


def service_workers() -> str:
    """VAULTGRAPH_WORKERS for the service under test: as `make run` (`serve --local-neo4j
    --workers 0`), half the CPUs, since the benchmark's Neo4j shares the host, unless the
    environment says otherwise."""
    workers = os.environ.get("VAULTGRAPH_WORKERS") or "0"
    # The service runs without --local-neo4j, so 0 is passed on as make run resolves it.
    return str(workers_beside_neo4j()) if workers.strip() == "0" else workers


def unwind_on_sigterm() -> None:
    """Make SIGTERM unwind like Ctrl-C (KeyboardInterrupt), so a harness's finally blocks stop
    the services and databases it started when it is killed."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def bench_neo4j(cfg: BenchConfig) -> LocalNeo4j:
    # The jars are shared with make run / make test; home, data and ports are the benchmark's own.
    return LocalNeo4j(home=cfg.neo4j_home, lib_dir=Path(cfg.home) / "neo4j-lib",
                      bolt_port=cfg.bolt_port, http_port=cfg.http_port,
                      heap=cfg.neo4j_heap, pagecache=cfg.neo4j_pagecache)


def _leftover_pids(home: Path) -> list[int]:
    """Neo4j servers running on the benchmark's own home (an earlier run killed hard)."""
    marker = f"--home-dir={home.resolve()}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if ENTRY_POINT.encode() in cmdline and marker in cmdline.split(b"\0"):
            found.append(int(proc.name))
    return found


def stop_leftovers(home: Path) -> None:
    """Stop the Neo4j servers an earlier run left running on `home` (killed hard, say)."""
    for pid in _leftover_pids(home):
        say(f"stopping a leftover benchmark Neo4j (pid {pid})")
        os.kill(pid, signal.SIGTERM)
        for _ in range(300):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.2)


def start_neo4j(cfg: BenchConfig) -> LocalNeo4j:
    """A fresh database: a leftover benchmark server is stopped and its data removed."""
    neo = bench_neo4j(cfg)
    neo.stop()
    stop_leftovers(cfg.neo4j_home)
    shutil.rmtree(cfg.neo4j_home / "data", ignore_errors=True)
    neo.start()
    return neo


class Service:
    """`vaultgraph serve` as a child process on the benchmark's port."""

    def __init__(self, cfg: BenchConfig, neo: LocalNeo4j, kek: str, *, unaudited: bool = False,
                 port: int | None = None):
        """`unaudited`: with the audit trail switched off (bench/unaudited), for the on/off
        comparison only. `port`: other than the benchmark's (its metrics on the next one), for
        a second service beside the first."""
        self.cfg = cfg
        self.port = cfg.port if port is None else port
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "VAULTGRAPH_PORT": str(self.port),
            "VAULTGRAPH_NEO4J_URI": neo.uri,
            "VAULTGRAPH_NEO4J_PASSWORD": neo.resolve_password(),
            "VAULTGRAPH_KEK": kek,
            "VAULTGRAPH_HOME": cfg.home,
            # One application drives every workload: its bucket must not be what is measured
            # (the check itself still runs on every request).
            "VAULTGRAPH_RATE_LIMIT": "1e9",
            "VAULTGRAPH_RATE_BURST": "1000000000",
            # The proxy workload's destination and webhook_create's receiver are local,
            # plain-http servers.
            "VAULTGRAPH_WEBHOOK_ALLOW_HTTP": "true",
            "VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
            # Scraped around each measured window (the audit writer's batch sizes).
            "VAULTGRAPH_METRICS_PORT": str(self.port + 1),
            "VAULTGRAPH_WORKERS": service_workers(),
            # This tree's statements, as the bare client's (`Catalog.load(PROJECT_ROOT /
            # "cypher")`): the package's catalog is the installed distribution's, and this
            # tree need not be the installed one (a worktree run with PYTHONPATH, say).
            "VAULTGRAPH_CYPHER_DIR": str(ROOT / "cypher"),
        }
        if unaudited:
            self.env["PYTHONPATH"] = first_on_path(UNAUDITED, os.environ.get("PYTHONPATH"))
        self.proc: subprocess.Popen | None = None
        self.log_path = cfg.work_dir / ("service.log" if self.port == cfg.port
                                        else f"service-{self.port}.log")

    def start(self, timeout: float = 300.0) -> None:  # start-up plans every statement first
        if _answers(self.url + "/health"):
            raise RuntimeError(f"something already serves on port {self.port}; "
                               "set BENCH_PORT to a free port (the benchmark uses it and the "
                               "three after it)")
        exe = Path(sys.executable).with_name("vaultgraph")
        self.cfg.work_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
            [str(exe), "serve"], env=self.env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while not _answers(self.url + "/ready"):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the service exited with {self.proc.returncode}; "
                                   f"see {self.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError("the service did not become ready")
            time.sleep(0.2)
        say(f"service ready on {self.url} (pid {self.proc.pid}, log {self.log_path})")

    def scrape(self) -> str:
        """The service's `/metrics` text (its metrics listener, summed over its workers)."""
        url = f"http://127.0.0.1:{self.port + 1}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.read().decode()

    def figures(self) -> dict[str, float]:
        """The service's audit and stall figures so far (bench/stalls.py)."""
        return stalls.from_exposition(self.scrape())

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if interrupt(self.proc, within=15):
            say("service stopped")


def interrupt(proc: subprocess.Popen | None, *, within: float) -> bool:
    """Stop a running `vaultgraph serve` as Ctrl-C would (it drains), killed when it has not
    exited `within` seconds later; False when there was nothing running."""
    if proc is None or proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        # Started in a session of its own: its workers (and a Neo4j `--local-neo4j` started
        # without a session of its own) go with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
    return True


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - local http only
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def new_kek() -> str:
    return KeyRing.generate_spec()


def machine() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {"nproc": len(os.sched_getaffinity(0)), "cpu_model": model, "mem_gib": mem_gib,
            "python": sys.version.split()[0],
            # Other work on the machine skews every number: the load average says how much.
            "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]}
