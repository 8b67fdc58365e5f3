"""The snapshot helper (tests/support/snapshot.py) catches every kind of change a write could
make: otherwise "the snapshot is unchanged" after a refused write would prove nothing."""

from __future__ import annotations

import pytest
from factories import database
from support.snapshot import Unchanged, tenant_snapshot
from tokens._support import TokenApi, card


async def _run(client, query: str, **params) -> None:
    db = database(client.server.app)
    await db.driver.execute_query(query, params, database_=db.database)


DELIBERATE_WRITES = {
    "property": "MATCH (t:Token {tenant_id: $t, id: 'snap-1'}) SET t.containers = ['/x/']",
    "new property": "MATCH (t:Token {tenant_id: $t, id: 'snap-1'}) SET t.extra = 1",
    "label": "MATCH (t:Token {tenant_id: $t, id: 'snap-1'}) SET t:Marked",
    "node": "CREATE (:Anything {tenant_id: $t})",
    "node deleted": "MATCH (t:Token {tenant_id: $t, id: 'snap-2'}) DETACH DELETE t",
    "edge": "MATCH (a:Token {tenant_id: $t, id: 'snap-1'}), (b:Token {tenant_id: $t, "
            "id: 'snap-2'}) CREATE (a)-[:PARENT_OF]->(b)",
    "edge property": "MATCH (:Token {tenant_id: $t, id: 'snap-1'})-[m:HAS_META]->() "
                     "SET m.kv = 'changed'",
    "edge deleted": "MATCH (:Token {tenant_id: $t, id: 'snap-1'})-[x:HAS_INDEX]->() DELETE x",
    "application": "MATCH (a:Application {tenant_id: $t}) SET a.name = 'renamed'",
    "tenant": "MATCH (n:Tenant {id: $t}) SET n.name = 'renamed'",
}


@pytest.mark.parametrize("write", DELIBERATE_WRITES, ids=str)
async def test_the_snapshot_sees_a_deliberate_write(client, tenant, admin_headers, write):
    api = TokenApi(client, admin_headers)
    await api.create({**card(), "id": "snap-1", "metadata": {"k": "v"},
                      "search_indexes": ["{{ data.number | last4 }}"]})
    await api.create({"id": "snap-2", "type": "token", "data": "x"})
    before = await tenant_snapshot(client, tenant.tenant_id)
    assert await tenant_snapshot(client, tenant.tenant_id) == before  # stable when idle
    assert {"snap-1", "snap-2"} <= before.token_ids()
    await _run(client, DELIBERATE_WRITES[write], t=tenant.tenant_id)
    after = await tenant_snapshot(client, tenant.tenant_id)
    assert before.diff(after) != {}
    with pytest.raises(AssertionError, match="a refused write changed stored state"):
        async with Unchanged(client, tenant.tenant_id):
            await _run(client, "MATCH (t:Token {tenant_id: $t, id: 'snap-1'}) "
                               "SET t.touched = coalesce(t.touched, 0) + 1", t=tenant.tenant_id)


async def test_the_snapshot_leaves_out_the_audit_trail_only(client, tenant, admin_headers):
    api = TokenApi(client, admin_headers)
    await api.create({"id": "snap-1", "type": "token", "data": "x"})
    async with Unchanged(client, tenant.tenant_id):
        await api.get("snap-1")  # a read writes its audit event, nothing else
        await api.get("no-such-token", expect=404)
