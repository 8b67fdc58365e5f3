"""What one webhook claim costs Neo4j with a backlog of due deliveries (docs/performance.md,
"Webhook deliveries"): `BENCH_CLAIM_BACKLOG` due deliveries of one webhook are written into the
Neo4j the environment names (as `vaultgraph serve` would find it), then the catalog's
`webhooks/claim` runs under PROFILE `BENCH_CLAIM_REPEATS` times, each in a transaction rolled
back (the claim's leases never stick), with the sender's own limit, scan and share. Printed per
run: the database hits and the wall time; the backlog is deleted at the end.

    .venv/bin/vaultgraph neo4j run -- .venv/bin/python -m bench.claim_backlog
    BENCH_CLAIM_BACKLOG=100000 .venv/bin/vaultgraph neo4j run -- \
        .venv/bin/python -m bench.claim_backlog

A claim that sorts every due delivery grows with the backlog; one that reads the index in order
stops at its scan whatever the backlog.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid

from neo4j import AsyncGraphDatabase

from vaultgraph.catalog import Catalog
from vaultgraph.settings import PROJECT_ROOT, Settings

from .environment import say

# The sender's defaults (services/webhook_sender.py): a claim of up to the deliveries a process
# holds, scanning ten times as many, the least share of a healthy webhook (a fast one may take
# up to half what a process holds: webhook_sender.Shares).
LIMIT, SCAN, SHARE = 256, 2560, 80
BATCH = 10_000  # deliveries written a transaction


def db_hits(plan: dict) -> int:
    return plan.get("dbHits", 0) + sum(db_hits(child) for child in plan.get("children", ()))


async def run(backlog: int, repeats: int,
              settings: Settings | None = None) -> list[tuple[int, float]]:
    """(database hits, seconds) of each claim."""
    settings = settings or Settings.from_env()
    catalog = Catalog.load(PROJECT_ROOT / "cypher")
    driver = AsyncGraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.resolved_neo4j_password()))
    webhook_id = f"bench-claim-{uuid.uuid4().hex[:8]}"
    out = []
    try:
        for start in range(1, backlog + 1, BATCH):  # a transaction's memory is bounded
            await driver.execute_query(
                "UNWIND range($start, $stop) AS i "
                "CREATE (:WebhookDelivery {webhook_id: $webhook_id, event_id: toString(i), "
                "tenant_id: 'bench-claim', state: 'pending', "
                "next_at: datetime() - duration({seconds: $n + 60 - i})})",
                start=start, stop=min(backlog, start + BATCH - 1), n=backlog,
                webhook_id=webhook_id, database_=settings.neo4j_database)
        params = {"limit": LIMIT, "scan": SCAN, "busy": [], "room": {},
                  "room_default": SHARE, "lease_ms": 60_000, "claim": "bench"}
        text = "PROFILE " + catalog.text("webhooks/claim")
        for _ in range(repeats):
            async with driver.session(database=settings.neo4j_database) as session:
                tx = await session.begin_transaction()
                began = time.perf_counter()
                summary = await (await tx.run(text, params)).consume()
                took = time.perf_counter() - began
                await tx.rollback()
            out.append((db_hits(summary.profile), took))
            say(f"claim with {backlog:,} due: {out[-1][0]:,} database hits, {took * 1000:.1f} ms")
    finally:
        async with driver.session(database=settings.neo4j_database) as session:
            await (await session.run(  # auto-commit: the only kind that batches itself
                "MATCH (d:WebhookDelivery {webhook_id: $webhook_id}) "
                "CALL (d) { DELETE d } IN TRANSACTIONS OF 10000 ROWS",
                webhook_id=webhook_id)).consume()
        await driver.close()
    return out


def main() -> int:
    backlog = int(os.environ.get("BENCH_CLAIM_BACKLOG", "20000"))
    repeats = int(os.environ.get("BENCH_CLAIM_REPEATS", "5"))
    asyncio.run(run(backlog, repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
