"""Sessions kept between statements against a session opened for each, A/B on the bare client
in one process against one Neo4j: `python -m bench.sessions_ab`.

The bare client of `make bench` (bench/workloads.py: the service's statements, crypto and
audit events through the plain driver, no HTTP; its audit batches through the service's
`Database`) runs each workload of SESSIONS_AB_WORKLOADS with SESSIONS_AB_CONCURRENCY
operations in flight, in windows that alternate between (the order rotating each round):

- `kept`: a statement takes a kept session and gives it back (repository/database.py
  `IdleSessions`, the service's way since 2026-12-04);
- `per-statement`: every statement opens a session and closes it (the way before): the same
  `IdleSessions` keeping none. Its sessions are opened with the kept ones' `NO_BOOKMARKS`;
  before 2026-12-04 they had no bookmark manager, which spared them a few calls to one.

Same process, same Neo4j, same data, the collector tuned as the service's is
(`VAULTGRAPH_GC_YOUNG_THRESHOLD`, the start-up heap frozen): what differs is the sessions
alone. Neo4j's JIT is warmed first (SESSIONS_AB_JVM_WARMUP seconds of each workload, both
ways). Reported per way and workload (medians of the rounds): operations a second, the
client's and Neo4j's CPU milliseconds an operation and the client's collections a window; and
the rounds in which `kept` answered more. Against the Neo4j of VAULTGRAPH_NEO4J_URI /
VAULTGRAPH_NEO4J_PASSWORD (e.g. under `vaultgraph neo4j run`); it adds a bench tenant and
HOTPATH_TOKENS tokens. Written to bench/results/sessions-ab-latest.json and a dated copy.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import resource
import statistics
import subprocess
import time

from vaultgraph.repository.database import IdleSessions
from vaultgraph.server import settle_heap, tune_gc

from .environment import say
from .hotpath_ir import bare_context, bench_tenant, close_context
from .run import bare_op, bare_settings, on_service_loop, provenance, write_results
from .workloads import WORKLOADS

WAYS = ("kept", "per-statement")
KEPT = IdleSessions().limit


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


def _collections() -> int:
    return sum(generation["collections"] for generation in gc.get_stats())


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


async def _use(kept: list[IdleSessions], way: str) -> None:
    """Every kept set closed, then keeping as many as `way` keeps."""
    for idle in kept:
        await idle.close(idle.manager)
        idle.limit = KEPT if way == "kept" else 0


async def main() -> None:
    names = _env("SESSIONS_AB_WORKLOADS", "get,create").split(",")
    rounds = int(_env("SESSIONS_AB_ROUNDS", "6"))
    seconds = float(_env("SESSIONS_AB_DURATION", "15"))
    warm = float(_env("SESSIONS_AB_WARMUP", "3"))
    concurrency = int(_env("SESSIONS_AB_CONCURRENCY", "32"))
    jvm_warm = float(_env("SESSIONS_AB_JVM_WARMUP", "60"))
    neo4j = _neo4j_pid()
    tune_gc(bare_settings())  # as make bench's bare client collects its garbage
    db, catalog, _, ring, tenant, ids = await bench_tenant()
    ctx, audit = bare_context(db, ring, tenant, ids, catalog)
    await db.apply_schema()  # the edition learnt: on Community, no bookmarks, as the service
    kept = [*db._idle.values(), *ctx.idle.values()]  # the A/B's one switch
    settle_heap()
    rows: dict[str, dict[str, list[dict]]] = {}
    try:
        for name in names:
            w = next(w for w in WORKLOADS if w.name == name)
            op = bare_op(w, ctx)
            rng = random.Random(name)  # noqa: S311 - request variety
            items = w.items(ctx, rng)
            rows[name] = {way: [] for way in WAYS}
            say(f"{name}: warming Neo4j's JVM up for {jvm_warm:.0f}s")
            for way in WAYS:
                await _use(kept, way)
                await _window(op, items, rng, jvm_warm / 2, concurrency)
            for r in range(rounds):
                for way in WAYS[r % 2:] + WAYS[:r % 2]:
                    await _use(kept, way)
                    await _window(op, items, rng, warm, concurrency)
                    await audit.settle()
                    cpu, n4j, collections = _own_cpu(), _ticks(neo4j), _collections()
                    began = time.perf_counter()
                    done, errors = await _window(op, items, rng, seconds, concurrency)
                    await audit.settle()
                    wall = time.perf_counter() - began
                    row = {"ops_per_s": round(done / wall, 1), "errors": errors,
                           "client_cpu_ms": round((_own_cpu() - cpu) * 1e3 / done, 3),
                           "neo4j_cpu_ms": round((_ticks(neo4j) - n4j) * 1e3 / done, 3),
                           "collections": _collections() - collections}
                    say(f"round {r + 1}/{rounds} {way:13} {name}: {row}")
                    rows[name][way].append(row)
    finally:
        await _use(kept, "kept")
        await close_context(ctx)
        await audit.stop()
        await db.close()
    summary = {}
    for name, ways in rows.items():
        summary[name] = {way: {k: round(statistics.median(x[k] for x in rs), 3) for k in rs[0]}
                         for way, rs in ways.items()}
        pairs = list(zip(ways["kept"], ways["per-statement"], strict=True))
        ratios = [a["ops_per_s"] / b["ops_per_s"] for a, b in pairs]
        summary[name]["kept_ahead_rounds"] = sum(r > 1 for r in ratios)
        summary[name]["ratio_geometric_mean"] = round(statistics.geometric_mean(ratios), 3)
        for way in WAYS:
            say(f"median {way:13} {name}: {summary[name][way]}")
        say(f"{name}: kept ÷ per-statement {summary[name]['ratio_geometric_mean']} (geometric "
            f"mean), kept ahead in {summary[name]['kept_ahead_rounds']} of {rounds} rounds")
    out = write_results({**provenance(), "concurrency": concurrency, "seconds": seconds,
                         "summary": summary, "rounds": rows}, "sessions-ab-")
    say(f"written to {out}")


if __name__ == "__main__":
    on_service_loop(main())
