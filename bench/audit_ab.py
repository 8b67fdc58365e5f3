"""What auditing costs the database and the driver, measured side by side (docs/audit.md,
Cost and growth): the bare side's create and get (bench/workloads.py, the service's own
statements through plain driver calls) run with their share of the audit trail and without it,
alternating in short rounds against one warmed Neo4j of its own, 32 requests at a time. Whole
`make bench` runs taken minutes apart differ by up to 60 % on this machine for identical code;
rounds that alternate within a minute share the machine's state, so the medians compare.

Reported per workload and mode: Neo4j's CPU and this process's CPU per request (milliseconds,
from /proc), requests per second, and the audited mode's cost against the plain one; written to
`bench/results/audit-ab-latest.json` and a dated copy.

    .venv/bin/python -m bench.audit_ab                          # 10 rounds of 3,000 requests
    BENCH_AUDIT_AB_ROUNDS=16 BENCH_AUDIT_AB_REQUESTS=5000 .venv/bin/python -m bench.audit_ab
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time

from vaultgraph.crypto import KeyRing
from vaultgraph.neo4j_local import LocalNeo4j
from vaultgraph.repository.audit import AuditRepository
from vaultgraph.services.audit_writer import AuditWriter
from vaultgraph.settings import Settings

from . import cpu
from .audit_storage import _connect, fresh_neo4j
from .dataset import create_bench_tenant, load_tokens
from .environment import new_kek, say
from .run import provenance, write_results
from .workloads import WORKLOADS, Context, audited

MEASURED = ("create", "get")
CONCURRENCY = 32


async def _round(ctx: Context, writer: AuditWriter, name: str, audit: bool, items: list,
                 groups: dict[str, int]) -> dict:
    w = next(w for w in WORKLOADS if w.name == name)
    todo = iter(items)

    async def one_connection() -> None:
        for item in todo:
            if audit:
                await audited(ctx, w.http(item), w.bare(ctx, item))
            else:
                await w.bare(ctx, item)

    before, began = cpu.snapshot(groups), time.monotonic()
    await asyncio.gather(*(one_connection() for _ in range(CONCURRENCY)))
    await writer.settle()  # the links of write events, which the request did not wait for
    seconds = time.monotonic() - began
    spent = cpu.per_request(before, cpu.snapshot(groups), len(items))
    return {"rps": len(items) / seconds, "neo4j": spent["neo4j"], "client": spent["client"]}


async def measure(neo: LocalNeo4j, rounds: int, requests: int, tokens: int) -> dict:
    db = await _connect(neo)
    ring = KeyRing.from_spec(new_kek())
    defaults = Settings()
    writer = AuditWriter(AuditRepository(db), ring, max_batch=defaults.audit_batch_max,
                         max_wait=defaults.audit_batch_wait, lanes=defaults.audit_lane_count)
    groups = {"neo4j": neo.running_pid(), "client": os.getpid()}
    try:
        await db.apply_schema()
        say(f"loading {tokens:,} tokens")
        tenant = await create_bench_tenant(db, ring)
        ids = await load_tokens(db, tenant, 0, tokens, 5_000)
        ctx = Context(tenant, ids, db.catalog, db.driver, audit=writer)
        rng = random.Random(7)  # noqa: S311 - which test data, not secrets
        samples: dict[tuple[str, bool], list[dict]] = {}
        for n in range(rounds + 1):  # round 0 warms up and is not kept
            for name in MEASURED:
                pool = next(w for w in WORKLOADS if w.name == name).items(ctx, rng)
                for audit in ((False, True) if n % 2 else (True, False)):
                    items = [pool[i % len(pool)] for i in range(requests)]
                    got = await _round(ctx, writer, name, audit, items, groups)
                    if n:
                        samples.setdefault((name, audit), []).append(got)
            say(f"round {n}/{rounds} done" + (" (warm-up)" if n == 0 else ""))
    finally:
        await writer.stop()
        await db.close()
    return summarize(samples, rounds, requests)


def summarize(samples: dict[tuple[str, bool], list[dict]], rounds: int, requests: int) -> dict:
    out: dict = {**provenance(), "rounds": rounds, "requests_per_round": requests,
                 "concurrency": CONCURRENCY, "workloads": {}}
    for name in MEASURED:
        row = {}
        for audit in (False, True):
            got = samples[(name, audit)]
            row["audited" if audit else "plain"] = {
                key: round(statistics.median(s[key] for s in got), 3)
                for key in ("rps", "neo4j", "client")}
        plain, audited_ = row["plain"], row["audited"]
        row["throughput_cost"] = round(1 - audited_["rps"] / plain["rps"], 3)
        row["cpu_ms_added"] = round(audited_["neo4j"] + audited_["client"]
                                    - plain["neo4j"] - plain["client"], 3)
        out["workloads"][name] = row
    return out


def table(result: dict) -> str:
    lines = ["| workload | mode | req/s | Neo4j CPU ms | client CPU ms |",
             "|---|---|--:|--:|--:|"]
    for name, row in result["workloads"].items():
        for mode in ("plain", "audited"):
            r = row[mode]
            lines.append(f"| {name} | {mode} | {r['rps']:.0f} | {r['neo4j']:.3f} | "
                         f"{r['client']:.3f} |")
        lines.append(f"| {name} | cost | {100 * row['throughput_cost']:.1f} % | "
                     f"+{row['cpu_ms_added']:.3f} ms (both) | |")
    return "\n".join(lines)


def main() -> int:
    rounds = int(os.environ.get("BENCH_AUDIT_AB_ROUNDS", "10"))
    requests = int(os.environ.get("BENCH_AUDIT_AB_REQUESTS", "3000"))
    tokens = int(os.environ.get("BENCH_AUDIT_AB_TOKENS", "20000"))
    with fresh_neo4j("audit-ab", heap="1g", pagecache="512m") as neo:
        neo.start()
        result = asyncio.run(measure(neo, rounds, requests, tokens))
    print(table(result))
    say(f"wrote {write_results(result, 'audit-ab-')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
