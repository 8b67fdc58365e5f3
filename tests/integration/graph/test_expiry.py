"""An expired token is deleted — as DELETE deletes it — by the sweeper, within the hour after
its expiry."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import UTC, datetime, timedelta

import pytest
from factories import audit_tenant, audit_tokens, blocked_behind, database, new_tenant, wait_blocked

from vaultgraph.api.typedefs import services_key
from vaultgraph.app import create_app
from vaultgraph.repository.database import Database
from vaultgraph.repository.expiry import ExpiryRepository
from vaultgraph.services import expiry
from vaultgraph.services.expiry import ExpirySweeper

from ._support import customer, cypher, expire

EXPIRED = 10_000


async def make_expired(client, tenant_id: str, n: int, *, prefix: str = "old",
                       parent_id: str | None = None, linked: int = 0) -> None:
    """Test data set-up: n tokens whose expiry has passed, written directly (the API refuses a
    past expires_at). Each has a metadata entry; the first `linked` are children of parent_id."""
    await cypher(client, """
        UNWIND range(0, $n - 1) AS i
        CREATE (t:Token {tenant_id: $t, id: $prefix + '-' + i, type: 'token',
                         containers: ['/general/high/'], data_ct: 'ciphertext',
                         metadata: '{"k":"v"}', fingerprint: 'fp-' + i,
                         fingerprint_expression: '{{ data | stringify }}',
                         created_at: datetime() - duration('P1D'), created_by: 'test',
                         expires_at: datetime() - duration({seconds: 1 + i % 3600})})
        CREATE (t)-[:HAS_META {tenant_id: $t, kv: $kv, token_id: t.id}]->(t)
        WITH t, i WHERE $parent IS NOT NULL AND i < $linked
        MATCH (p:Token {tenant_id: $t, id: $parent})
        CREATE (p)-[:PARENT_OF {created_at: datetime()}]->(t)""",
                 t=tenant_id, n=n, prefix=prefix, parent=parent_id, linked=linked,
                 kv="k\u001fv")


async def state(client, tenant_id: str) -> dict:
    rows = await cypher(client, """
        CALL () { MATCH (t:Token {tenant_id: $t}) WHERE t.expires_at < datetime()
                  RETURN count(t) AS expired_live }
        CALL () { MATCH (d:DeletedToken {tenant_id: $t})
                  WHERE d.deleted_reason = 'expired' AND d.deleted_by = 'expiry-sweeper'
                  RETURN count(d) AS swept, sum(count { (d)--() }) AS swept_edges }
        RETURN expired_live, swept, swept_edges""", t=tenant_id)
    return rows[0]


@pytest.mark.slow
async def test_sweep_deletes_exactly_the_expired_tokens_while_reads_go_on(api, client, tenant):
    parent = await api.create(customer("Parent", id="live-parent"))
    live = [parent] + [await api.create(customer(f"Live {i}", id=f"live-{i}",
                                                 expires_at="1/1/2999"))
                       for i in range(4)]
    await api.link("live-parent", "live-1")
    await make_expired(client, tenant.tenant_id, EXPIRED, parent_id="live-parent", linked=100)
    assert (await state(client, tenant.tenant_id))["expired_live"] == EXPIRED

    sweeper = client.server.app[services_key].expiry
    sweep = asyncio.create_task(sweeper.sweep())
    reads = []
    while not sweep.done() or not reads:
        for token in live:
            resp = await client.get(f"/tokens/{token['id']}", headers=api.headers)
            reads.append(resp.status)
    swept = await sweep

    assert set(reads) == {200}
    assert swept > 0  # other processes' sweepers may share the work, never redo it
    after = await state(client, tenant.tenant_id)
    assert after == {"expired_live": 0, "swept": EXPIRED, "swept_edges": 0}
    for token in live:
        assert (await api.get(token["id"]))["id"] == token["id"]
    assert [c["id"] for c in (await api.children("live-parent"))["data"]] == ["live-1"]


async def test_a_swept_token_is_the_same_audit_reference_as_a_deleted_one(api, client, tenant):
    for name in ("deleted", "expired"):
        await api.create(customer(id=f"{name}-tok", metadata={"k": "v"},
                                  expires_at="1/1/2999"))
        await api.create(customer(id=f"{name}-kid"))
        await api.link(f"{name}-tok", f"{name}-kid")
    await api.delete("deleted-tok")
    await expire(client, tenant.tenant_id, "expired-tok")
    await client.server.app[services_key].expiry.sweep()

    rows = await cypher(client, """
        MATCH (d {tenant_id: $t}) WHERE d.id IN ['deleted-tok', 'expired-tok']
        RETURN d.id AS id, labels(d) AS labels, properties(d) AS props,
               count { (d)--() } AS edges""", t=tenant.tenant_id)
    by_id = {r["id"]: r for r in rows}
    deleted, swept = by_id["deleted-tok"], by_id["expired-tok"]
    assert deleted["labels"] == swept["labels"] == ["DeletedToken"]
    assert set(deleted["props"]) == set(swept["props"])
    assert (swept["props"]["deleted_reason"], swept["props"]["deleted_by"]) == (
        "expired", "expiry-sweeper")
    assert deleted["edges"] == swept["edges"] == 0
    assert (await api.children("expired-kid"))["data"] == []
    await api.get("expired-kid")  # a child outlives its parent


async def test_a_sweep_logs_its_pass_under_its_trace_id(api, client, tenant, caplog):
    """A served process logs at INFO: the pass's summary line is written (it once raised
    KeyError there, a `trace_id` extra clashing with the one every record carries, so every
    periodic sweep was logged as failed) and carries the trace id of its audit events."""
    await api.create(customer(id="logged-tok", expires_at="1/1/2999"))
    await expire(client, tenant.tenant_id, "logged-tok")
    caplog.set_level(logging.INFO, logger="vaultgraph.services.expiry")
    assert await client.server.app[services_key].expiry.sweep() >= 1
    [line] = [r for r in caplog.records if r.getMessage() == "expiry sweep"]
    assert line.swept >= 1
    # The sweep's events get their integer keys when they are linked into the chain, after it.
    await client.server.app[services_key].audit_writer.settle()
    [event] = [r for r in await cypher(client, """
        MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr})
        WHERE e.application_id = 'system'
        RETURN e.trace_id AS trace_id, properties(e) AS p""", **audit_tenant(tenant.tenant_id))
               if "logged-tok" in audit_tokens(r["p"])]
    assert line.trace_id == event["trace_id"] and len(event["trace_id"]) == 32


async def test_an_expired_token_reads_as_unknown_before_it_is_swept(api, client, tenant):
    token = await api.create(customer(expires_at="1/1/2999"))
    await expire(client, tenant.tenant_id, token["id"])
    unknown = await api.get("no-such-token", 404)
    assert await api.get(token["id"], 404) == unknown


async def test_sweepers_of_several_replicas_at_once_delete_each_token_once(client, tenant):
    await make_expired(client, tenant.tenant_id, 1_000, prefix="replica")
    db = database(client.server.app)
    # The unguarded pass, as separate processes would run it: no in-process lock between them.
    repo = ExpiryRepository(db)
    counts = [r.swept for r in await asyncio.gather(*(
        repo.sweep(batch=100, actor=expiry.ACTOR, reason=expiry.REASON, event={},
                   limit=10_000) for _ in range(3)))]
    # Each token is counted by the one pass that deleted it (others' tokens may add to it).
    assert sum(counts) >= 1_000
    after = await state(client, tenant.tenant_id)
    assert after == {"expired_live": 0, "swept": 1_000, "swept_edges": 0}


async def test_the_background_sweeper_deletes_expired_tokens(aiohttp_client, settings,
                                                             admin_headers, tenant):
    fast = dataclasses.replace(settings, expiry_sweep_interval=0.2)
    client = await aiohttp_client(create_app(fast))
    resp = await client.post("/tokens", json=customer(expires_at="1/1/2999"),
                             headers=admin_headers)
    token = await resp.json()
    await expire(client, tenant.tenant_id, token["id"])
    for _ in range(100):
        rows = await cypher(client, "MATCH (d:DeletedToken {tenant_id: $t, id: $id}) "
                                    "RETURN d.deleted_reason AS reason",
                            t=tenant.tenant_id, id=token["id"])
        if rows:
            break
        await asyncio.sleep(0.1)
    assert rows == [{"reason": "expired"}]


async def test_a_failed_sweep_is_logged_and_retried(dead_sockets_collected, client, caplog):
    # Neo4j "down": a real driver pointed at a port where nothing listens.
    down = Database.connect("neo4j://127.0.0.1:9", "neo4j", "unused",
                            database(client.server.app).catalog, "neo4j")
    sweeper = ExpirySweeper(ExpiryRepository(down), interval=0.01, batch=10)
    caplog.set_level(logging.WARNING, logger="vaultgraph.services.expiry")
    sweeper.start()
    try:
        for _ in range(500):
            failures = [r for r in caplog.records if r.getMessage().startswith(
                "expiry sweep failed")]
            if len(failures) >= 3:
                break
            await asyncio.sleep(0.02)
        assert len(failures) >= 3
        assert not sweeper.task.done()
        assert all(r.error for r in failures)  # the error type, never its text
    finally:
        await sweeper.stop()
        await down.close()
    assert sweeper.task.done() and not sweeper.task.cancelled()


async def test_shutdown_stops_and_awaits_the_sweeper(aiohttp_client, settings):
    client = await aiohttp_client(create_app(settings))
    sweeper = client.server.app[services_key].expiry
    assert sweeper.task is not None and not sweeper.task.done()
    await client.close()
    assert sweeper.task.done() and not sweeper.task.cancelled()


async def test_a_sweep_under_way_at_shutdown_hands_its_events_over(aiohttp_client, settings,
                                                                   admin_headers, tenant):
    # The sweep's statement is held by a lock while the sweeper is told to stop: its
    # deletion commits in Neo4j anyway, so stopping waits for the answer and hands the event
    # to the audit writer (cancelled, the event stayed pending for good and `verify` named it).
    fast = dataclasses.replace(settings, expiry_sweep_interval=0.2)
    client = await aiohttp_client(create_app(fast))
    app = client.server.app
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    resp = await client.post("/tokens", json=customer(expires_at=soon), headers=admin_headers)
    token = await resp.json()
    assert resp.status == 201, token
    db = database(app)
    sweeping = db.catalog.text("expiry/sweep")
    async with db.driver.session(database=db.database) as session:
        held = await session.begin_transaction()  # before it expires: the sweep will wait
        await (await held.run("MATCH (t:Token {tenant_id: $t, id: $id}) SET t.held = true",
                              t=tenant.tenant_id, id=token["id"])).consume()
        await wait_blocked(db, sweeping)  # the sweep waits for the held token
        stopping = asyncio.ensure_future(app[services_key].expiry.stop())
        await held.commit()
        await stopping
    await app[services_key].audit_writer.settle()
    rows = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr}) "
                                "WHERE e.reason = 'expired' "
                                "RETURN e:PendingAuditEvent AS pending, e.chain IS NOT NULL AS "
                                "chained, properties(e) AS p", **audit_tenant(tenant.tenant_id))
    assert [{k: r[k] for k in ("pending", "chained")} for r in rows
            if token["id"] in audit_tokens(r["p"])] == [{"pending": False, "chained": True}]


async def test_an_interval_of_zero_leaves_only_on_demand_sweeps(aiohttp_client, settings):
    client = await aiohttp_client(create_app(
        dataclasses.replace(settings, expiry_sweep_interval=0.0)))
    app = client.server.app
    sweeper = app[services_key].expiry
    assert sweeper.task is None
    # Its own tenant (no other app of this test sweeps in the background), and no expired
    # token left anywhere by earlier tests, so the on-demand pass below counts only this one.
    tenant = await new_tenant(app)
    while await sweeper.sweep():
        pass
    resp = await client.post("/tokens", json=customer(expires_at="1/1/2999"),
                             headers={"SVC-API-KEY": tenant.key})
    token = await resp.json()
    await expire(client, tenant.tenant_id, token["id"])
    live = "MATCH (t:Token {tenant_id: $t, id: $id}) RETURN t.id AS id"
    assert await cypher(client, live, t=tenant.tenant_id, id=token["id"]) == [
        {"id": token["id"]}]  # expired, and nothing swept it on its own
    assert await sweeper.sweep() == 1
    assert await cypher(client, live, t=tenant.tenant_id, id=token["id"]) == []
    assert await cypher(client, "MATCH (d:DeletedToken {tenant_id: $t, id: $id}) "
                                "RETURN d.deleted_reason AS reason, d.deleted_by AS by",
                        t=tenant.tenant_id, id=token["id"]) == [
        {"reason": "expired", "by": expiry.ACTOR}]


async def test_a_token_whose_expiry_was_extended_meanwhile_is_not_swept(api, client, tenant):
    # The sweep found the token expired, then waited for its lock while a PATCH extending the
    # expiry held it. Once the PATCH commits the token is live: it was once swept anyway, its
    # data and links deleted right after the extension was answered 200.
    await api.create(customer(id="extended", expires_at="1/1/2999"))
    await api.create(customer(id="extended-kid"))
    await api.link("extended", "extended-kid")
    await expire(client, tenant.tenant_id, "extended")
    app = client.server.app
    await blocked_behind(
        app, [("MATCH (t:Token {tenant_id: $t, id: 'extended'}) "
               "SET t.expires_at = datetime() + duration('PT1H')", {"t": tenant.tenant_id})],
        app[services_key].expiry.sweep(), statement="expiry/sweep")
    assert (await api.get("extended"))["data"] == {"name": "Ada"}
    assert [c["id"] for c in (await api.children("extended"))["data"]] == ["extended-kid"]
