"""What one service worker spends while no request comes: `python -m bench.idle_cpu [variant
...]`, CPU milliseconds a second.

A worker works on timers whether or not requests come: the webhook sender's poll (a claim
statement every VAULTGRAPH_WEBHOOK_POLL_INTERVAL seconds), the event loop's stall monitor (a
wake every 0.1 s), the expiry sweep. It goes on under load, where `make bench` counts it in
the service's CPU a request: at a few hundred requests a second, each millisecond a second
is a few microseconds a request. Of these, the benchmark's bare client runs a stall monitor
too, and no webhook sender.

Each variant is one argument: `defaults` (the settings as they are), or environment settings
for the worker, comma-separated (`VAULTGRAPH_WEBHOOK_POLL_INTERVAL=0`). No argument: those two.
For each variant and round (IDLE_CPU_ROUNDS, default 2), one worker (`python -m
vaultgraph.server`, a throwaway key-encryption key, metrics off) starts against the Neo4j of
VAULTGRAPH_NEO4J_URI / VAULTGRAPH_NEO4J_PASSWORD, answers /ready, is left alone for
IDLE_CPU_SETTLE seconds (default 15: its start-up work done), and its CPU (user + system, from
/proc, in clock ticks: at 100 a second, one tick over 60 s is 0.17 ms a second) is read over
IDLE_CPU_SECONDS (default 60) with no request sent. The worker listens on IDLE_CPU_PORT
(default 8393). Written to `bench/results/idle-cpu-latest.json` and a dated copy.

Run it against a Neo4j holding no webhook deliveries still due (a fresh home, as below): a
worker sends what is due to it, and those attempts would be counted as idle work.

    VAULTGRAPH_HOME=$(mktemp -d) VAULTGRAPH_NEO4J_BOLT_PORT=7695 VAULTGRAPH_NEO4J_HTTP_PORT=7480 \\
        .venv/bin/vaultgraph neo4j run -- .venv/bin/python -m bench.idle_cpu
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from . import cpu
from .environment import new_kek, say
from .hotpath_ir import served
from .run import provenance, write_results

DEFAULT_VARIANTS = ("defaults", "VAULTGRAPH_WEBHOOK_POLL_INTERVAL=0")


def variant_env(variant: str) -> dict[str, str]:
    """The worker's settings a variant names: none for `defaults`, else `NAME=value` pairs
    separated by commas. A pair without `=`, or a name that is not a VAULTGRAPH_ setting, is
    refused."""
    if variant == "defaults":
        return {}
    env: dict[str, str] = {}
    for pair in variant.split(","):
        name, sep, value = pair.partition("=")
        if not sep or not name.startswith("VAULTGRAPH_"):
            raise ValueError(f"{pair!r}: expected VAULTGRAPH_<NAME>=<value>")
        env[name] = value
    return env


def ms_a_second(ticks: int, seconds: float) -> float:
    """CPU milliseconds a second from CPU ticks counted over `seconds`."""
    return round(ticks * cpu.TICK_MS / seconds, 2)


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def measure(variant: str, seconds: float, settle: float, port: int, out: Path) -> float:
    """One worker of `variant`, idle: its CPU milliseconds a second over `seconds`."""
    env = {**os.environ, "VAULTGRAPH_PORT": str(port), "VAULTGRAPH_KEK": new_kek(),
           "VAULTGRAPH_WORKERS": "1", "VAULTGRAPH_METRICS_PORT": "0",
           # A throwaway KEK: the key check passes over tenants other runs left.
           "VAULTGRAPH_SHARED_DATABASE": "true", **variant_env(variant)}
    with served([sys.executable, "-m", "vaultgraph.server"], env, out, port,
                "the worker") as proc:
        time.sleep(settle)
        before, began = cpu.own_ticks(proc.pid), time.monotonic()
        time.sleep(seconds)
        ticks, took = cpu.own_ticks(proc.pid) - before, time.monotonic() - began
        return ms_a_second(ticks, took)


def main(argv: list[str]) -> int:
    variants = argv or list(DEFAULT_VARIANTS)
    for variant in variants:
        variant_env(variant)  # refused before anything starts
    seconds = float(_env("IDLE_CPU_SECONDS", "60"))
    settle = float(_env("IDLE_CPU_SETTLE", "15"))
    rounds = int(_env("IDLE_CPU_ROUNDS", "2"))
    port = int(_env("IDLE_CPU_PORT", "8393"))
    logs = Path(tempfile.mkdtemp(prefix="idle-cpu-"))
    result: dict = {**provenance(),
                    "settings": {"seconds": seconds, "settle_s": settle, "rounds": rounds},
                    "ms_a_second": {}}
    for variant in variants:
        figures = []
        for n in range(rounds):
            figures.append(measure(variant, seconds, settle, port,
                                   logs / f"{len(result['ms_a_second'])}-{n}.log"))
            say(f"{variant}, round {n + 1}: {figures[-1]} CPU ms a second, idle")
        result["ms_a_second"][variant] = {"median": statistics.median(figures),
                                          "rounds": figures}
    print(f"\n{'variant':<50} CPU ms a second, idle (median; rounds)")
    for variant, figure in result["ms_a_second"].items():
        print(f"{variant:<50} {figure['median']:>6}   {figure['rounds']}")
    say(f"worker logs in {logs}")
    say(f"written to {write_results(result, 'idle-cpu-')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
