"""A write that Neo4j committed but whose answer never reached the service (the connection died
after the commit, before its reply): the request is answered 503, the change is made once — the
driver does not run it again (a commit whose answer was lost is not retryable) — and its audit
event, stored by the write itself, is linked into the chain once, with the outcome the caller
got. Done for real at the Bolt level: a relay in front of Neo4j forwards the write and its
commit, lets Neo4j answer, and drops the answer with the connection."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest
from factories import audit_tenant

from vaultgraph.api.typedefs import services_key
from vaultgraph.audit.ids import route_number

from .conftest import BoltProxy, Link, neo4j_address, wait_ready

CARD = {"type": "card", "data": {"number": "4242424242424242"}}
# A Bolt COMMIT message in its chunk: size 2, a struct of no fields with signature 0x12, end.
COMMIT = b"\x00\x02\xb0\x12\x00\x00"
# The text of every write statement that creates its request's event (repository/audit_prefix.py
# AUDIT_PREFIX): marks the connection carrying the write.
WRITE = b"CREATE (audit_event:AuditEvent"


class LossyProxy(BoltProxy):
    """Relays as BoltProxy does; once armed with markers, the first connection whose client
    sends them all in order has every answer after the last one withheld until Neo4j's reply
    carries a bookmark (its commit took place), then the connection is cut, answer unsent."""

    def __init__(self, *target):
        super().__init__(*target)
        self.markers: list[bytes] = []
        self.cut = asyncio.Event()

    def arm(self, *markers: bytes) -> None:
        self.markers = list(markers)
        self.cut.clear()

    def link(self) -> Link:
        return LosingLink(self)


class LosingLink(Link):
    def __init__(self, proxy: LossyProxy):
        self.proxy = proxy
        self.seen = 0  # markers this connection sent, in order
        self.withheld = b""

    def losing(self) -> bool:
        return self.seen == len(self.proxy.markers) > 0 and not self.proxy.cut.is_set()

    def to_neo4j(self, data: bytes) -> bytes | None:
        markers = self.proxy.markers
        if not self.proxy.cut.is_set():
            while self.seen < len(markers) and markers[self.seen] in data:
                self.seen += 1
        return data

    def to_service(self, data: bytes) -> bytes | None:
        if not self.losing():
            return data
        self.withheld += data
        if b"bookmark" not in self.withheld:
            return b""
        self.proxy.cut.set()  # committed: the answer is lost with the connection
        self.proxy.markers = []
        return None


async def stored(served, query: str, **params) -> list[dict]:
    db = served.app[services_key].database
    records, _, _ = await db.driver.execute_query(query, params, database_=db.database)
    return [r.data() for r in records]


async def events(served, tenant_id: str, route: str) -> list[dict]:
    await served.app[services_key].audit_writer.settle()
    return await stored(served, """
        MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr}) WHERE e.route = $route
        RETURN e.outcome AS outcome, e.status AS status, e:PendingAuditEvent AS pending,
               e.chain IS NOT NULL AS chained""", **audit_tenant(tenant_id),
                             route=route_number(route))


async def own_chain_verifies(served) -> bool:
    services = served.app[services_key]
    return await services.audit_log.verify(chains={services.audit_writer.chain}) == []


async def test_a_create_committed_but_unanswered_is_a_503_made_once_and_audited_once(
        serve, tenant, settings):
    proxy = LossyProxy(*neo4j_address(settings))
    await proxy.up()
    try:
        served = await serve(neo4j_uri=proxy.uri)
        await wait_ready(served)
        proxy.arm(WRITE)  # one auto-commit statement: the write is its own commit
        async with aiohttp.ClientSession(f"http://127.0.0.1:{served.port}") as http:
            async with http.post("/tokens", json=CARD,
                                 headers={"SVC-API-KEY": tenant.key}) as resp:
                assert resp.status == 503, await resp.text()
                assert "Retry-After" in resp.headers
        assert proxy.cut.is_set()
        assert len(await stored(served, "MATCH (t:Token {tenant_id: $t}) RETURN t.id",
                                t=tenant.tenant_id)) == 1
        assert await events(served, tenant.tenant_id, "POST /tokens") == [
            {"outcome": "unavailable", "status": 503, "pending": False, "chained": True}]
        assert await own_chain_verifies(served)
    finally:
        await proxy.down()


@pytest.mark.parametrize(("patch", "markers"), [
    # Its one statement (it writes only a token still as read): the write is its own commit.
    ({"metadata": {"lost": "answer"}}, (WRITE,)),
    # An update that must look for a duplicate runs under the token's lock, as a managed
    # transaction (lock, read, write, commit).
    ({"metadata": {"lost": "answer"}, "deduplicate_token": True}, (WRITE, COMMIT)),
], ids=["statement", "transaction"])
async def test_an_update_whose_commit_answer_was_lost_is_not_run_again(
        serve, tenant, settings, patch, markers):
    """The driver retries a managed transaction on a transient error, and the service a
    statement, but neither after a commit whose answer was lost: run again, the change and
    its event would be written twice (the event's place refused as taken)."""
    proxy = LossyProxy(*neo4j_address(settings))
    await proxy.up()
    try:
        served = await serve(neo4j_uri=proxy.uri)
        await wait_ready(served)
        key = {"SVC-API-KEY": tenant.key}
        async with aiohttp.ClientSession(f"http://127.0.0.1:{served.port}") as http:
            async with http.post("/tokens", json=CARD, headers=key) as resp:
                assert resp.status == 201
                token = await resp.json()
            proxy.arm(*markers)
            async with http.patch(f"/tokens/{token['id']}", data=orjson.dumps(patch),
                                  headers={**key, "Content-Type": "application/merge-patch+json"}
                                  ) as resp:
                assert resp.status == 503, await resp.text()
        assert proxy.cut.is_set()
        [row] = await stored(served, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                     "RETURN t.metadata AS metadata",
                             t=tenant.tenant_id, id=token["id"])
        assert orjson.loads(row["metadata"]) == {"lost": "answer"}
        assert await events(served, tenant.tenant_id, "PATCH /tokens/{id}") == [
            {"outcome": "unavailable", "status": 503, "pending": False, "chained": True}]
        assert await own_chain_verifies(served)
    finally:
        await proxy.down()


async def test_a_retry_of_a_create_whose_answer_was_lost_is_not_run_again(
        serve, tenant, settings):
    """With an Idempotency-Key, the client retries the 503 with the same key: while the first
    claim's lease runs it is in flight (409); after it, the stored event of the first request
    shows its write committed (the entry marked `written` in the write's own transaction), so
    the retry is told so (409) instead of creating a second token
    — before, the 503 gave the key back and the retry created one."""
    proxy = LossyProxy(*neo4j_address(settings))
    await proxy.up()
    try:
        served = await serve(neo4j_uri=proxy.uri, idempotency_lease=1.0, request_timeout=1.0)
        await wait_ready(served)
        headers = {"SVC-API-KEY": tenant.key, "Idempotency-Key": "lost-create"}
        proxy.arm(WRITE)
        async with aiohttp.ClientSession(f"http://127.0.0.1:{served.port}") as http:
            async with http.post("/tokens", json=CARD, headers=headers) as resp:
                assert resp.status == 503, await resp.text()
            assert proxy.cut.is_set()
            async with http.post("/tokens", json=CARD, headers=headers) as resp:
                assert resp.status == 409 and "still being processed" in await resp.text()
            await asyncio.sleep(1.2)  # the first claim's lease runs out
            for _ in range(2):
                async with http.post("/tokens", json=CARD, headers=headers) as resp:
                    problem = await resp.json(content_type=None)
                    assert resp.status == 409 and "answer was lost" in problem["detail"]
        tokens = await stored(served, "MATCH (t:Token {tenant_id: $t}) RETURN t.id AS id",
                              t=tenant.tenant_id)
        assert len(tokens) == 1
        [entry] = await stored(served, "MATCH (k:IdempotencyKey {application_id: $a, "
                                       "key: 'lost-create'}) "
                                       "RETURN k.state AS state, k.token_ids AS ids",
                               a=tenant.application_id)
        assert entry == {"state": "unanswered", "ids": [tokens[0]["id"]]}
    finally:
        await proxy.down()
