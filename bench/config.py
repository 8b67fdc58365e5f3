"""Benchmark settings, read once from `BENCH_*` environment variables (documented in
docs/performance.md)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"


_RUN_STARTED = time.strftime("%Y-%m-%dT%H%M%SZ", time.gmtime())


# Settings whose empty value is a choice of its own (BENCH_AUDIT_OFF=: no on/off comparison);
# any other setting set empty keeps its default.
_EMPTY_MEANS_NONE = frozenset({"audit_off"})


@dataclass(frozen=True)
class BenchConfig:
    duration: float = 15.0          # measured seconds per workload and side (service, bare)
    warmup: float = 5.0             # discarded seconds before each measurement
    jvm_warmup: float = 150.0       # at most this long, before the first measurement, until
                                    # Neo4j's JIT compiler has settled (0: skip)
    workload_settle: float = 60.0   # at most this long before each workload's first window,
                                    # both sides in turn until Neo4j's CPU a request settles
                                    # (0: skip)
    concurrency: int = 32           # connections (wrk) or coroutines (bare driver)
    tokens: int = 100_000           # stored tokens loaded before the workloads
    load_batch: int = 5_000         # rows per UNWIND transaction when loading
    port: int = 8089                # the service under test
    bolt_port: int = 7689           # the benchmark's own Neo4j
    http_port: int = 7476
    neo4j_heap: str = "1g"
    neo4j_pagecache: str = "1g"
    loadgen: str = "wrk"            # wrk (Debian package, Lua scripts) or python (aiohttp client)
    wrk_threads: int = 1
    workloads: str = ""             # comma-separated subset; empty runs them all
    profile: bool = False           # py-spy the service after each workload's measurement
    plans: bool = False             # PROFILE each workload's statements (db hits per request)
    audit_off: str = "create,get"   # workloads measured again with the trail on and off, on two
                                    # services side by side (bench/unaudited); empty: none
    audit_rounds: int = 0           # rounds of the audit on/off comparison; 0: BENCH_ROUNDS
    jfr: bool = False               # JFR-record Neo4j from before the JVM warm-up; each measured
                                    # window's samples by side (bench/jfr.py)
    jfr_period_ms: int = 10         # BENCH_JFR's execution sampling period
    bare_first: bool = False        # measure each workload's bare side before its service side
    webhook_rate: float = 300.0     # webhook_create's creates a second on both sides (a fixed
                                    # rate, below what either side answers); 0: closed loop
    fixed_rate: float = 0.0         # every other workload's requests a second on both sides (a
                                    # fixed rate, to compare Neo4j's CPU a request at one
                                    # throughput); 0: closed loop
    rounds: int = 1                 # windows per workload and side, the sides' order turned
                                    # about each round; the figures are the windows' together
    one_rate: float = 0.5           # after each closed-loop workload, both sides again at one
                                    # rate: this share of the slower side's closed-loop req/s,
                                    # BENCH_ROUNDS rounds (what the service adds, judged where
                                    # both do the same work a second); 0: not
    scale_sizes: str = "10000,100000"  # make bench-scale; add 1000000 for the full run
    soak: float = 300.0             # make bench-soak: seconds of the get workload, after warm-up
    soak_sample: float = 15.0       # seconds between the soak's memory samples
    home: str = str(ROOT / ".vaultgraph")

    def __post_init__(self) -> None:
        # wrk counts a connection silent for its 10 s timeout as timed out, even while it waits
        # for its slot: at a rate under that, every connection would.
        for name, rate in (("BENCH_WEBHOOK_RATE", self.webhook_rate),
                           ("BENCH_FIXED_RATE", self.fixed_rate)):
            if 0 < rate < self.concurrency / 10:
                raise ValueError(f"{name} must be 0 or at least BENCH_CONCURRENCY / 10 "
                                 f"({self.concurrency / 10:g}): each connection waits "
                                 "concurrency / rate seconds between requests, and wrk counts "
                                 "a wait over 10 s as a timeout")
        if not 0 <= self.one_rate < 1:
            raise ValueError("BENCH_ONE_RATE must be 0 (no one-rate windows) or a share below 1 "
                             "of the slower side's closed-loop requests a second")
        if self.audit_rounds < 0:
            raise ValueError("BENCH_AUDIT_ROUNDS must be 0 (BENCH_ROUNDS) or more")

    @property
    def audit_round_count(self) -> int:
        """Rounds of the audit trail's on/off comparison: BENCH_AUDIT_ROUNDS, else
        BENCH_ROUNDS, at least one."""
        return max(1, self.audit_rounds or self.rounds)

    @classmethod
    def from_env(cls, environ=None) -> BenchConfig:
        env = os.environ if environ is None else environ
        values = {}
        for f in fields(cls):
            raw = env.get("BENCH_" + f.name.upper())
            if raw is None or (raw == "" and f.name not in _EMPTY_MEANS_NONE):
                continue
            kind = type(f.default)
            if kind is bool:
                values[f.name] = raw.lower() in ("1", "true", "yes", "on")
            else:
                values[f.name] = kind(raw)
        return cls(**values)

    @property
    def neo4j_home(self) -> Path:
        return Path(self.home) / "bench-neo4j"

    @property
    def work_dir(self) -> Path:
        """Scratch files: request pools for wrk, the service log, profiles."""
        return Path(self.home) / "bench-work"

    @property
    def profile_dir(self) -> Path:
        """BENCH_PROFILE's collapsed stacks, one file per workload and side, kept with the
        results: a folder a run (its start, UTC), so a second run the same day keeps the
        first's."""
        return RESULTS / "profiles" / _RUN_STARTED

    def audit_off_workloads(self) -> list[str]:
        return [w.strip() for w in self.audit_off.split(",")
                if w.strip() and self.selected(w.strip())]

    def selected(self, name: str) -> bool:
        wanted = [w.strip() for w in self.workloads.split(",") if w.strip()]
        return not wanted or name in wanted

    def sizes(self) -> list[int]:
        return [int(s) for s in self.scale_sizes.split(",") if s.strip()]
