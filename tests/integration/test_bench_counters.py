"""The benchmark's Neo4j transaction counter (bench/run.py) on the real Neo4j: it counts the
transactions begun between two readings, whatever kind they are."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import neo4j

from vaultgraph.settings import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:  # bench/ is the checkout's, not the distribution's
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.run import transaction_number, transactions_per_request


async def test_transactions_between_two_readings_are_counted(settings):
    driver = neo4j.AsyncGraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.resolved_neo4j_password()))
    ctx = SimpleNamespace(driver=driver, database=settings.neo4j_database)
    try:
        first = await transaction_number(ctx)
        async with driver.session(database=settings.neo4j_database) as session:
            for _ in range(3):  # three auto-commit reads
                await (await session.run("RETURN 1")).consume()
            # and two managed write transactions of two statements each
            for _ in range(2):
                await session.execute_write(lambda tx: _two(tx))
        second = await transaction_number(ctx)
    finally:
        await driver.close()
    # Five transactions, ten requests: half a transaction each. Nothing else runs in this
    # database while a test does (the apps of earlier tests are closed), so it is exact.
    assert transactions_per_request(first, second, 10) == 0.5
    assert transactions_per_request(first, second, 0) is None


async def _two(tx: neo4j.AsyncManagedTransaction) -> None:
    await (await tx.run("RETURN 1")).consume()
    await (await tx.run("RETURN 2")).consume()
