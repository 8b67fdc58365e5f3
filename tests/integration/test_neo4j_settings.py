"""The Neo4j that `make test` and `make run` start is configured as docs/operations.md
says ("The local Neo4j")."""

from __future__ import annotations

import neo4j


async def test_neo4j_sends_no_keep_alive_hint(settings):
    """With `connection.recv_timeout_seconds` the driver wraps every socket read in a timer
    (a third of its CPU reading a page); the launcher turns the hint off and the service bounds
    each statement with its own deadline instead."""
    driver = neo4j.AsyncGraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.resolved_neo4j_password()))
    try:
        async with driver.session(database=settings.neo4j_database) as session:
            await (await session.run("RETURN 1")).consume()
        # The driver keeps the hints on the pooled connection (no public accessor).
        connections = [c for pool in driver._pool.connections.values() for c in pool]
        assert connections
        for connection in connections:
            assert "connection.recv_timeout_seconds" not in connection.connection_hints
            assert connection.socket.get_read_timeout() is None
    finally:
        await driver.close()


async def _setting(settings, name: str) -> list[str]:
    """The value of Neo4j setting `name` on the server the tests run against."""
    driver = neo4j.AsyncGraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.resolved_neo4j_password()))
    try:
        records, _, _ = await driver.execute_query(
            "SHOW SETTINGS YIELD name, value WHERE name = $name RETURN value",
            name=name, database_=settings.neo4j_database)
        return [r["value"] for r in records]
    finally:
        await driver.close()


async def test_neo4j_prunes_its_transaction_logs_past_a_gibibyte(settings):
    """Neo4j's default keeps two days of transaction logs whatever their size (18 GiB after a
    9.45M-token load); the launcher keeps 1 GiB, pruned at each checkpoint."""
    assert await _setting(settings, "db.tx_log.rotation.retention_policy") == ["1G size"]


async def test_neo4j_keeps_cached_plans_an_hour(settings):
    """The audit trail moves the statistics with every request: with Neo4j's 10 s the
    statements were replanned in waves every few minutes, each stalling every request. The plan
    tests (tokens/test_index_plans.py, search/test_plans.py, the audit trail's) run with it: a
    plan kept an hour must still be the right one, so the statements whose plan statistics
    could change name their index."""
    assert await _setting(settings, "dbms.cypher.min_replan_interval") == ["1h"]


async def _cached_after(settings, values: list[str]) -> int:
    """How many entries Neo4j's query caches hold after one statement is planned with each of
    `values` as its parameter, from empty caches."""
    import re

    driver = neo4j.AsyncGraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.resolved_neo4j_password()))
    try:
        clear = "CALL db.clearQueryCaches()"
        await driver.execute_query(clear, database_=settings.neo4j_database)
        for value in values:
            await driver.execute_query(
                "EXPLAIN MATCH (t:Token {tenant_id: $tenant_id}) RETURN t.id",
                tenant_id=value, database_=settings.neo4j_database)
        records, _, _ = await driver.execute_query(clear, database_=settings.neo4j_database)
        cleared = re.search(r"of (\d+) quer", records[0]["value"])
        return int(cleared.group(1)) if cleared else 0
    finally:
        await driver.close()


async def test_neo4j_keeps_one_plan_whatever_the_size_of_a_parameter(settings):
    """By default Neo4j caches a plan per size class of every string and list parameter
    (empty, 1, up to 10, up to 100, ...), so a request whose metadata or batch fell in a new
    class paid a second or more of planning, and the start-up warm-up could not plan every
    combination; the launcher turns that off (`internal.cypher.use_parameter_size=false`, an
    internal setting that `SHOW SETTINGS` does not list, hence this test of what it does)."""
    uuid_like = "00000000-0000-4000-8000-000000000000"
    one_class = await _cached_after(settings, [uuid_like, uuid_like.replace("0", "1")])
    three_classes = await _cached_after(settings, ["", "x", uuid_like])
    assert one_class > 0
    assert three_classes == one_class
