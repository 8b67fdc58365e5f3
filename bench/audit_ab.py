"""What auditing costs the database and the driver, measured side by side (docs/audit.md,
Cost and growth): the bare side's create and get (bench/workloads.py, the service's own
statements through plain driver calls) run with their share of the audit trail and without it,
alternating in short rounds against one warmed Neo4j of its own, 32 requests at a time. Whole
`make bench` runs taken minutes apart differ by up to 60 % on this machine for identical code;
rounds that alternate within a minute share the machine's state, so the medians compare.

With BENCH_AUDIT_AB_WITHOUT=<index or constraint>,... a second Neo4j runs beside the first, the
same schema less those (the trail's own: what fewer index entries an event would save), and each
round runs every workload on both, audited and plain, in an order that rotates from round to
round; each side is reported against its own plain mode. With BENCH_AUDIT_AB_FORMS=once,ahead,intent
a Neo4j runs beside the first for each form named, the full schema, whose bare side stores a
write's event in that form (bench/audit_forms.py: the cheapest the database work of each
alternative could be, measured before building it), in the same rotating rounds.

Reported per workload, side and mode: Neo4j's CPU and this process's CPU per request
(milliseconds, from /proc), requests per second, and the audited mode's cost against the plain
one; written to `bench/results/audit-ab-latest.json` and a dated copy.

    .venv/bin/python -m bench.audit_ab                          # 10 rounds of 3,000 requests
    BENCH_AUDIT_AB_ROUNDS=16 BENCH_AUDIT_AB_REQUESTS=5000 .venv/bin/python -m bench.audit_ab
    BENCH_AUDIT_AB_WARMUP=4 BENCH_AUDIT_AB_WITHOUT=audit_at,audit_tenant_key_operation_at \
        .venv/bin/python -m bench.audit_ab
    BENCH_AUDIT_AB_WARMUP=3 BENCH_AUDIT_AB_FORMS=once,ahead,intent \
        .venv/bin/python -m bench.audit_ab
    BENCH_AUDIT_AB_WORKLOADS=tokenize,update .venv/bin/python -m bench.audit_ab

BENCH_AUDIT_AB_WORKLOADS names the workloads measured (bench/workloads.py; create and get
unless it is set).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import time

from prometheus_client import REGISTRY

from vaultgraph.crypto import KeyRing
from vaultgraph.neo4j_local import LocalNeo4j
from vaultgraph.repository.database import Database
from vaultgraph.services.audit_writer import AuditWriter
from vaultgraph.settings import Settings

from . import audit_forms, cpu
from .audit_storage import _connect, fresh_neo4j
from .dataset import create_bench_tenant, load_tokens
from .environment import new_kek, say
from .run import provenance, write_results
from .workloads import WORKLOADS, Context, audited

MEASURED = ("create", "get")  # BENCH_AUDIT_AB_WORKLOADS=<name>,... measures others
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


FULL = "full schema"


class Side:
    """One Neo4j with its database, audit writer and loaded tenant."""

    def __init__(self, neo: LocalNeo4j, without: tuple[str, ...] = (),
                 form: str | None = None) -> None:
        self.neo, self.without = neo, without
        self.form = audit_forms.Form(form) if form else None
        self.db: Database | None = None
        self.writer: AuditWriter | None = None
        self.writer_settings: dict = {}
        self.ctx: Context | None = None

    async def open(self, tokens: int) -> None:
        self.db = db = await _connect(self.neo)
        ring = KeyRing.from_spec(new_kek())
        # The writer as the environment sets it (VAULTGRAPH_AUDIT_*), the service's defaults
        # otherwise.
        defaults = Settings.from_env()
        repo = audit_forms.repository(self.form, db)
        self.writer = AuditWriter.from_settings(repo, ring, defaults)
        self.writer_settings = {
            "batch_max": defaults.audit_batch_max, "batch_wait": defaults.audit_batch_wait,
            "lanes": defaults.audit_lane_count, "write_chains": defaults.audit_write_chains,
            "settle_wait": defaults.audit_settle_wait}
        self.groups = {"neo4j": self.neo.running_pid(), "client": os.getpid()}
        await db.apply_schema()
        # A constraint owns its index: it is dropped as a constraint.
        named = {kind: {r["name"] for r in (await db.driver.execute_query(
            f"SHOW {shown} YIELD name"))[0]}
            for kind, shown in (("CONSTRAINT", "CONSTRAINTS"), ("INDEX", "INDEXES"))}
        for name in self.without:
            kind = next((k for k in named if name in named[k]), None)
            if kind is None:
                raise SystemExit(f"no index or constraint named {name!r} in the schema")
            await db.driver.execute_query(f"DROP {kind} {name}")  # a name the schema just listed
        say(f"loading {tokens:,} tokens")
        tenant = await create_bench_tenant(db, ring)
        ids = await load_tokens(db, tenant, 0, tokens, 5_000)
        self.ctx = Context(tenant, ids, db.catalog, db.driver, audit=self.writer,
                           write_form=self.form)

    async def close(self) -> None:
        """What `open` opened, if it got that far."""
        if self.writer is not None:
            await self.writer.stop()
        if self.ctx is not None:
            await self.ctx.close()
        if self.db is not None:
            await self.db.close()


def orders(sides: list[str], n: int) -> list[tuple[str, bool]]:
    """Round n's order of (side, audited): every pair once, rotated by one from round to
    round, so each pair runs first (and last) as often as the others."""
    pairs = [(side, audit) for audit in (False, True) for side in sides]
    k = n % len(pairs)
    return pairs[k:] + pairs[:k]


def failed_batches() -> float:
    """Audit batches this process could not write so far (a link's failure fails no request:
    without this count, a side whose batches failed would look cheaper)."""
    return REGISTRY.get_sample_value("vaultgraph_audit_batch_failures_total") or 0.0


async def measure(sides: dict[str, Side], rounds: int, warmup: int, requests: int,
                  tokens: int, measured: tuple[str, ...] = MEASURED) -> dict:
    failed_before = failed_batches()
    try:
        for side in sides.values():
            await side.open(tokens)
        rng = random.Random(7)  # noqa: S311 - which test data, not secrets
        samples: dict[tuple[str, str, bool], list[dict]] = {}
        for n in range(warmup + rounds):  # the warm-up rounds are not kept
            for name in measured:
                for label, audit in orders(list(sides), n):
                    side = sides[label]
                    pool = next(w for w in WORKLOADS if w.name == name).items(side.ctx, rng)
                    items = [pool[i % len(pool)] for i in range(requests)]
                    got = await _round(side.ctx, side.writer, name, audit, items, side.groups)
                    if n >= warmup:
                        samples.setdefault((name, label, audit), []).append(got)
            say(f"round {n + 1}/{warmup + rounds} done" + (" (warm-up)" if n < warmup else ""))
    finally:
        for side in sides.values():
            await side.close()
    if (failed := failed_batches() - failed_before) > 0:
        raise SystemExit(f"{failed:.0f} audit batches failed: the sides are not comparable")
    return summarize(samples, {label: {"indexes_dropped": list(side.without),
                                       "write_event_form": side.form.name if side.form
                                       else "service", "writer": side.writer_settings}
                             for label, side in sides.items()},
                     rounds, warmup, requests, measured)


def summarize(samples: dict[tuple[str, str, bool], list[dict]],
              sides: dict[str, dict], rounds: int, warmup: int, requests: int,
              measured: tuple[str, ...] = MEASURED) -> dict:
    out: dict = {**provenance(), "rounds": rounds, "warmup_rounds": warmup,
                 "requests_per_round": requests, "concurrency": CONCURRENCY,
                 "sides": sides, "workloads": {}}
    for name in measured:
        for label in sides:
            row: dict = {}
            for audit in (False, True):
                got = samples[(name, label, audit)]
                row["audited" if audit else "plain"] = {
                    key: round(statistics.median(s[key] for s in got), 3)
                    for key in ("rps", "neo4j", "client")}
            plain, audited_ = row["plain"], row["audited"]
            row["throughput_cost"] = round(1 - audited_["rps"] / plain["rps"], 3)
            row["neo4j_ms_added"] = round(audited_["neo4j"] - plain["neo4j"], 3)
            row["cpu_ms_added"] = round(audited_["neo4j"] + audited_["client"]
                                        - plain["neo4j"] - plain["client"], 3)
            row["audited_neo4j_rounds"] = [round(s["neo4j"], 3)
                                           for s in samples[(name, label, True)]]
            if len(sides) == 1:
                out["workloads"][name] = row
            else:
                out["workloads"].setdefault(name, {})[label] = row
    return out


def table(result: dict) -> str:
    lines = ["| workload | side | mode | req/s | Neo4j CPU ms | client CPU ms |",
             "|---|---|---|--:|--:|--:|"]
    for name, rows in result["workloads"].items():
        by_side = rows if "plain" not in rows else {FULL: rows}
        for label, row in by_side.items():
            for mode in ("plain", "audited"):
                r = row[mode]
                lines.append(f"| {name} | {label} | {mode} | {r['rps']:.0f} | "
                             f"{r['neo4j']:.3f} | {r['client']:.3f} |")
            lines.append(f"| {name} | {label} | cost | {100 * row['throughput_cost']:.1f} % | "
                         f"+{row['neo4j_ms_added']:.3f} ms | +{row['cpu_ms_added']:.3f} ms "
                         "(both) |")
    return "\n".join(lines)


def main() -> int:
    rounds = int(os.environ.get("BENCH_AUDIT_AB_ROUNDS", "10"))
    warmup = int(os.environ.get("BENCH_AUDIT_AB_WARMUP", "1"))
    requests = int(os.environ.get("BENCH_AUDIT_AB_REQUESTS", "3000"))
    tokens = int(os.environ.get("BENCH_AUDIT_AB_TOKENS", "20000"))
    without = tuple(n for n in os.environ.get("BENCH_AUDIT_AB_WITHOUT", "").split(",") if n)
    forms = [n for n in os.environ.get("BENCH_AUDIT_AB_FORMS", "").split(",") if n]
    measured = tuple(n for n in os.environ.get("BENCH_AUDIT_AB_WORKLOADS", "").split(",")
                     if n) or MEASURED
    if unknown := set(measured) - {w.name for w in WORKLOADS}:
        raise SystemExit(f"BENCH_AUDIT_AB_WORKLOADS: no workload named {sorted(unknown)}")
    with contextlib.ExitStack() as stack:
        sides = {FULL: Side(stack.enter_context(
            fresh_neo4j("audit-ab", heap="1g", pagecache="512m")), ())}
        if without:
            sides["without " + ", ".join(without)] = Side(stack.enter_context(
                fresh_neo4j("audit-ab-without", heap="1g", pagecache="512m")), without)
        for form in forms:
            sides["write event " + form] = Side(stack.enter_context(
                fresh_neo4j(f"audit-ab-{form}", heap="1g", pagecache="512m")), form=form)
        for side in sides.values():
            side.neo.start()
        result = asyncio.run(measure(sides, rounds, warmup, requests, tokens, measured))
    print(table(result))
    say(f"wrote {write_results(result, 'audit-ab-')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
