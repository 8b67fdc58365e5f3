"""The audit writer's gather rule, A/B on the bare client in one process against one Neo4j:
`python -m bench.gather_ab`.

The bare client of `make bench` (bench/workloads.py: the service's statements, crypto and
audit events through the plain driver, no HTTP) runs a workload with GATHER_AB_CONCURRENCY
operations in flight, in windows that alternate between two rules for how long a batch waits
for the requests in flight (the order rotating each round):

- `all`: while any announced request has yet to hand its event over (the rule until
  2026-12-04);
- `share`: until the requests the batch holds that wait on it are their lane's share of those
  in flight (`AuditWriter._gathering`).

Same process, same Neo4j, same data: what differs is the rule alone. Neo4j's JIT is warmed
first (GATHER_AB_JVM_WARMUP seconds of the workload), then a round of both rules unrecorded.
Reported per rule (medians of the rounds): operations a second, the client's and Neo4j's CPU
milliseconds an operation and audit events per batch. Against the Neo4j of VAULTGRAPH_NEO4J_URI /
VAULTGRAPH_NEO4J_PASSWORD (e.g. under `vaultgraph neo4j run`); it adds a bench tenant and
HOTPATH_TOKENS tokens.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import time

from prometheus_client import REGISTRY

from vaultgraph.services.audit_writer import AuditWriter
from vaultgraph.settings import PROJECT_ROOT

from .environment import say
from .hotpath_ir import bare_context, bench_tenant, close_context
from .run import bare_op, on_service_loop
from .workloads import WORKLOADS


def _all(self: AuditWriter) -> bool:
    return self._arriving > 0 and len(self._pending) < self._max_batch


RULES = {"all": _all, "share": AuditWriter._gathering}


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _neo4j_pid() -> int:
    out = subprocess.run(["pgrep", "-f", "org.neo4j.server"],  # noqa: S607 - fixed argv
                         capture_output=True, text=True, check=True).stdout.split()
    if len(out) != 1:
        raise SystemExit(f"expected one Neo4j server process, found {len(out)}")
    return int(out[0])


def _ticks(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def _window(op, items, rng, seconds: float, concurrency: int) -> tuple[int, int]:
    deadline = time.perf_counter() + seconds
    done = errors = 0

    async def one() -> None:
        nonlocal done, errors
        while time.perf_counter() < deadline:
            try:
                await op(items[rng.randrange(len(items))])
            except Exception:  # counted, as make bench counts answers >= 400
                errors += 1
            done += 1

    await asyncio.gather(*(one() for _ in range(concurrency)))
    return done, errors


async def main() -> None:
    name = _env("GATHER_AB_WORKLOAD", "get")
    rounds = int(_env("GATHER_AB_ROUNDS", "6"))
    seconds = float(_env("GATHER_AB_DURATION", "15"))
    warm = float(_env("GATHER_AB_WARMUP", "3"))
    concurrency = int(_env("GATHER_AB_CONCURRENCY", "32"))
    jvm_warm = float(_env("GATHER_AB_JVM_WARMUP", "90"))
    neo4j = _neo4j_pid()
    db, catalog, _, ring, tenant, ids = await bench_tenant()
    ctx, audit = bare_context(db, ring, tenant, ids, catalog)
    w = next(w for w in WORKLOADS if w.name == name)
    op = bare_op(w, ctx)
    rng = random.Random(name)  # noqa: S311 - request variety
    items = w.items(ctx, rng)
    rows: dict[str, list[dict]] = {rule: [] for rule in RULES}
    try:
        say(f"warming Neo4j's JVM up for {jvm_warm:.0f}s")
        await _window(op, items, rng, jvm_warm, concurrency)
        for r in range(rounds + 1):  # the first round warms both rules up, unrecorded
            order = list(RULES)[r % 2:] + list(RULES)[:r % 2]
            for rule in order:
                AuditWriter._gathering = RULES[rule]
                await _window(op, items, rng, warm, concurrency)
                await audit.settle()
                cpu, n4j = _own_cpu(), _ticks(neo4j)
                batches = _sample("vaultgraph_audit_batches_total")
                events = _sample("vaultgraph_audit_events_total")
                began = time.perf_counter()
                done, errors = await _window(op, items, rng, seconds, concurrency)
                await audit.settle()
                wall = time.perf_counter() - began
                row = {"ops_per_s": round(done / wall, 1), "errors": errors,
                       "client_cpu_ms": round((_own_cpu() - cpu) * 1e3 / done, 3),
                       "neo4j_cpu_ms": round((_ticks(neo4j) - n4j) * 1e3 / done, 3),
                       "events_per_batch": round(
                           (_sample("vaultgraph_audit_events_total") - events)
                           / max(1.0, _sample("vaultgraph_audit_batches_total") - batches), 1)}
                label = "warm-up" if r == 0 else f"round {r}/{rounds}"
                say(f"{label} {rule:5} {name}: {row}")
                if r:
                    rows[rule].append(row)
    finally:
        AuditWriter._gathering = RULES["share"]
        await close_context(ctx)
        await audit.stop()
        await db.close()
    summary = {rule: {k: statistics.median(x[k] for x in rs) for k in rs[0]}
               for rule, rs in rows.items()}
    for rule, s in summary.items():
        say(f"median {rule:5} {name}: {s}")
    wins = sum(a["ops_per_s"] > b["ops_per_s"] for a, b in zip(rows["share"], rows["all"],
                                                                  strict=True))
    say(f"share ahead in {wins} of {rounds} rounds")
    out = PROJECT_ROOT / "bench" / "results" / f"gather-ab-{name}-latest.json"
    out.write_text(json.dumps({"workload": name, "concurrency": concurrency,
                               "seconds": seconds, "summary": summary, "rounds": rows},
                              indent=1) + "\n")
    say(f"written to {out}")


if __name__ == "__main__":
    on_service_loop(main())
