"""bench/claim_backlog.py on the real Neo4j: it profiles the catalog's claim over a backlog it
writes, rolls every claim back and deletes its backlog."""

from __future__ import annotations

import sys

from neo4j import AsyncGraphDatabase

from vaultgraph.settings import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:  # bench/ is the checkout's, not the distribution's
    sys.path.insert(0, str(PROJECT_ROOT))

from bench import claim_backlog


async def test_a_profiled_claim_reads_the_backlog_and_leaves_nothing_behind(settings):
    runs = await claim_backlog.run(40, 2, settings)
    assert len(runs) == 2
    assert all(hits >= 40 for hits, _ in runs)  # each read every due delivery of the backlog
    driver = AsyncGraphDatabase.driver(settings.neo4j_uri,
                                       auth=(settings.neo4j_user,
                                             settings.resolved_neo4j_password()))
    try:
        records, _, _ = await driver.execute_query(
            "MATCH (d:WebhookDelivery {tenant_id: 'bench-claim'}) RETURN count(d) AS n",
            database_=settings.neo4j_database)
    finally:
        await driver.close()
    assert records[0]["n"] == 0
