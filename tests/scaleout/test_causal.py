"""Causal consistency (docs/operations.md). Where the process may talk to more than one server
(any server but Community: an Enterprise cluster, Aura), every session it opens is chained
through the driver's one bookmark manager, so each statement, routed to any member, starts after
this process's earlier writes; on a Community server, always one server, it uses none (they
guard nothing there and cost a little per statement). A single server cannot show a lagging
follower: these tests show, on the real Neo4j, when the manager is used, that every kind of
session is given it when there is one (it is asked for bookmarks before the work and told the
new one after it), and that the read routing setting is applied."""

from __future__ import annotations

import dataclasses
import shutil
from importlib import import_module
from pathlib import Path

import neo4j
import pytest

from vaultgraph.api.typedefs import services_key
from vaultgraph.app import create_app
from vaultgraph.catalog import PACKAGE, Catalog
from vaultgraph.repository.database import Database
from vaultgraph.settings import ConfigError, Settings


class Recorder:
    """A real bookmark manager (the driver's own) whose supplier and consumer count the
    sessions that consult it and keep the bookmarks it was last told."""

    def __init__(self) -> None:
        self.asked = 0
        self.latest: frozenset[str] = frozenset()
        self.manager = neo4j.AsyncGraphDatabase.bookmark_manager(
            bookmarks_supplier=self._supply, bookmarks_consumer=self._consume)

    def _supply(self) -> neo4j.Bookmarks:
        self.asked += 1
        return neo4j.Bookmarks()

    def _consume(self, bookmarks: neo4j.Bookmarks) -> None:
        self.latest = frozenset(bookmarks.raw_values)


async def reads_its_write(client, services, tenant_name: str) -> None:
    tenant = await services.tenants.create(tenant_name)
    headers = {"SVC-API-KEY": tenant.key}
    resp = await client.post("/tokens", json={"type": "token", "data": "x"}, headers=headers)
    token = await resp.json()
    resp = await client.get(f"/tokens/{token['id']}", headers=headers)
    assert (resp.status, (await resp.json())["data"]) == (200, "x")


@pytest.fixture
async def recorded(aiohttp_client, settings):
    """A service whose process behaves as on a cluster: it has a bookmark manager (set after
    start-up, which found this Community server and dropped the driver's)."""
    client = await aiohttp_client(create_app(settings))
    services = client.server.app[services_key]
    recorder = Recorder()
    services.database.bookmarks = recorder.manager
    return client, services, recorder


def connect(settings, cypher_dir=None) -> Database:
    return Database.connect(settings.neo4j_uri, settings.neo4j_user,
                            settings.resolved_neo4j_password(),
                            Catalog.load(cypher_dir or settings.cypher_dir),
                            settings.neo4j_database)


async def community(settings) -> bool:
    db = connect(settings)
    try:
        records, _, _ = await db.driver.execute_query(db.catalog["health/edition"])
        return records[0]["edition"] == "community"
    finally:
        await db.close()


async def test_a_community_server_is_one_server_so_no_bookmarks_are_sent(aiohttp_client,
                                                                          settings):
    if not await community(settings):
        pytest.skip("needs a Community server (this test's claim is about one)")
    db = connect(settings)
    try:
        assert db.bookmarks is db.driver.execute_query_bookmark_manager  # until learnt
        await db.apply_schema()
        assert db.bookmarks is None
        # A manager given afterwards (as on a cluster) is kept when the schema is applied again.
        recorder = Recorder()
        db.bookmarks = recorder.manager
        await db.apply_schema()
        assert db.bookmarks is recorder.manager and recorder.asked
    finally:
        await db.close()

    # The service's own process, once started, keeps no bookmarks anywhere: the driver's
    # manager is told of no commit by its writes and reads.
    client = await aiohttp_client(create_app(settings))
    services = client.server.app[services_key]
    assert services.database.bookmarks is None
    default = services.database.driver.execute_query_bookmark_manager
    before = await default.get_bookmarks()
    await reads_its_write(client, services, "one-server")
    await services.expiry.sweep()
    await services.database.touch()
    assert await default.get_bookmarks() == before


async def test_an_unreadable_edition_keeps_the_bookmarks(settings, tmp_path):
    cypher = tmp_path / "cypher"
    shutil.copytree(settings.cypher_dir or Path(import_module(PACKAGE).__file__).parent, cypher,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (cypher / "health" / "edition.cypher").write_text(
        "CALL dbms.noSuchProcedure() YIELD edition RETURN edition\n")
    db = connect(settings, cypher)
    try:
        await db.apply_schema()  # the server refuses the statement; start-up goes on
        assert db.schema_applied
        assert db.bookmarks is db.driver.execute_query_bookmark_manager
    finally:
        await db.close()


async def test_one_process_chains_its_reads_after_its_writes(recorded):
    client, services, recorder = recorded
    tenant = await services.tenants.create("causal")
    headers = {"SVC-API-KEY": tenant.key}
    assert recorder.latest  # the tenant's write told the manager its bookmark

    written = recorder.latest
    resp = await client.post("/tokens", json={"type": "token", "data": "chained"},
                             headers=headers)
    assert resp.status == 201
    token = await resp.json()
    assert recorder.latest and recorder.latest != written  # a newer commit

    asked = recorder.asked
    resp = await client.get(f"/tokens/{token['id']}", headers=headers)
    assert resp.status == 200
    assert (await resp.json())["data"] == "chained"
    assert recorder.asked > asked  # the read's session started from the process's bookmarks

    for work in (services.expiry.sweep,  # auto-commit batches (CALL … IN TRANSACTIONS)
                 services.database.touch,  # readiness
                 services.database.apply_schema):  # driver.execute_query
        asked = recorder.asked
        await work()
        assert recorder.asked > asked, work


async def test_a_managed_transaction_is_chained_too(recorded):
    client, services, recorder = recorded
    tenant = await services.tenants.create("causal-tx")
    headers = {"SVC-API-KEY": tenant.key}
    resp = await client.post("/tokens", json={"type": "token", "data": "a"}, headers=headers)
    token = await resp.json()
    before, asked = recorder.latest, recorder.asked
    # A PATCH that turns dedup on locks the token and updates it in one managed transaction
    # (any other is read, then written by one statement).
    resp = await client.patch(f"/tokens/{token['id']}",
                              data=b'{"data": "b", "deduplicate_token": true}',
                              headers={**headers, "Content-Type": "application/merge-patch+json"})
    assert resp.status == 200, await resp.text()
    assert recorder.asked > asked
    assert recorder.latest != before


async def test_leader_reads_route_reads_as_writes(aiohttp_client, settings):
    client = await aiohttp_client(create_app(dataclasses.replace(
        settings, neo4j_read_routing="write")))
    services = client.server.app[services_key]
    assert services.database.read_access == neo4j.WRITE_ACCESS
    await reads_its_write(client, services, "leader-reads")


def test_reads_are_routed_as_reads_by_default_and_other_values_are_refused():
    assert Settings().neo4j_read_routing == "read"
    assert Settings.from_env({"VAULTGRAPH_NEO4J_READ_ROUTING": "write"}).neo4j_read_routing \
        == "write"
    with pytest.raises(ConfigError, match="VAULTGRAPH_NEO4J_READ_ROUTING is 'leader'") as err:
        Settings.from_env({"VAULTGRAPH_NEO4J_READ_ROUTING": "leader"})
    assert err.value.fix == "set VAULTGRAPH_NEO4J_READ_ROUTING to read or write"
