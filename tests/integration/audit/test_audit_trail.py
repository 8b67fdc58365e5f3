"""The audit trail (docs/audit.md): an event for every request that reaches a protected route,
durable before the answer, chained and verifiable, readable by `log:read` in its own tenant."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from factories import database, key_headers, make_application, new_tenant, retime_chain
from neo4j.exceptions import ConstraintError

from vaultgraph.api.typedefs import services_key
from vaultgraph.audit import context as audit_context
from vaultgraph.audit.chain import KeyProblem, sign
from vaultgraph.audit.event import OUTCOMES
from vaultgraph.audit.ids import ROUTES, chain_forms, id_parts, query_ids, route_number
from vaultgraph.audit.query import LogFilter
from vaultgraph.crypto import KeyRing
from vaultgraph.errors import Unavailable
from vaultgraph.pagination import encode_cursor
from vaultgraph.repository.audit import (
    BEGINNING,
    END,
    AuditRepository,
    event_of,
    native,
    time_forms,
)
from vaultgraph.repository.database import Database
from vaultgraph.repository.records import at_number
from vaultgraph.services.audit_log import AuditLog
from vaultgraph.services.audit_writer import AuditWriter, new_chain_id

CANARY = "4111111111111111"  # a Luhn-valid card number that must never reach an event
EVENT_FIELDS = {"id", "at", "tenant_id", "application_id", "key_id", "operation", "route",
                "token_ids", "outcome", "status", "transform", "transform_counts", "trace_id",
                "client_ip", "user_agent", "reason"}


async def settle(client) -> None:
    """Writes' events are linked into the chain after the answer: wait for that."""
    await client.server.app[services_key].audit_writer.settle()


# Events hold a UUID tenant's and token's id as two integers (audit/ids.py): queries here match
# them so ($tk, $tr: `of_tenant`; $ik, $ir with $id: `of_token`).
NAMES_TOKEN = ("(e.token_key = $ik AND coalesce(e.token_rest = $ir, e.token_id = $id) "
               "OR $id IN e.token_ids)")


def of_tenant(tenant_id: str) -> dict:
    parts = query_ids(tenant_id=tenant_id)
    return {"tk": parts["tenant_key"], "tr": parts["tenant_rest"]}


def of_token(token_id: str) -> dict:
    parts = query_ids(token_id=token_id)
    return {"id": token_id, "ik": parts["token_key"], "ir": parts["token_rest"]}


async def cypher(client, query: str, **params):
    """Run `query`; a chain named `c` is also given as `cs`, the forms its events may hold its
    id in (an integer, or the text of events stored before docs/adr/0028)."""
    if isinstance(params.get("c"), str):
        params["cs"] = chain_forms(params["c"])
    if isinstance(params.get("route"), str):
        params["route"] = route_number(params["route"])
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(query, params, database_=db.database)
    return [r.data() for r in records]


@pytest.fixture
async def auditor(client, admin_headers):
    return key_headers(await make_application(client, admin_headers, permissions=["log:read"],
                                              name="auditor"))


@pytest.fixture
async def reader(client, admin_headers):
    rules = [{"container": "/pci/", "transform": "reveal", "permissions": ["token:read"]}]
    return key_headers(await make_application(client, admin_headers, rules=rules,
                                              permissions=["token:read"], name="reader"))


async def logs(client, headers, **params) -> list[dict]:
    resp = await client.get("/logs", params=params, headers=headers)
    body = await resp.json()
    assert resp.status == 200, body
    return body["data"]


async def every_page(client, headers, **params) -> list[dict]:
    """Every event `GET /logs` shows under `params`, page after page by its cursor."""
    seen, start = [], None
    while True:
        resp = await client.get("/logs", params={**params, **({"start": start} if start else {})},
                                headers=headers)
        body = await resp.json()
        assert resp.status == 200, body
        seen += body["data"]
        start = body["pagination"]["next"]
        if not start:
            return seen


@pytest.fixture
def settings(settings):
    """One audit lane: these tests read, tamper with and verify "the" chain of a run of
    requests, which one lane keeps in one chain (test_group_commit.py covers two lanes)."""
    return dataclasses.replace(settings, audit_lanes=1)


def chain_of(client) -> str:
    return client.server.app[services_key].audit_writer.chain


async def verify_own_chain(client) -> list[str]:
    findings = await client.server.app[services_key].audit_log.verify(chains={chain_of(client)})
    return [f.describe() for f in findings]


async def create_card(client, headers, number: str = CANARY, **extra) -> dict:
    resp = await client.post("/tokens", json={"type": "card", "data": {"number": number},
                                              **extra}, headers=headers)
    body = await resp.json()
    assert resp.status == 201, body
    return body


# --- an event for every request ---------------------------------------------------------------

async def test_a_reveal_is_recorded_with_who_what_and_how(client, admin_headers, tenant, reader,
                                                         auditor):
    card = await create_card(client, admin_headers)
    resp = await client.get(f"/tokens/{card['id']}", headers={**reader, "User-Agent": "ua/1"})
    assert (await resp.json())["data"]["number"] == CANARY
    events = await logs(client, auditor, token_id=card["id"])
    assert [(e["operation"], e["route"], e["outcome"], e["status"]) for e in events] == [
        ("token:read", "GET /tokens/{id}", "success", 200),
        ("token:create", "POST /tokens", "success", 201)]
    read = events[0]
    assert set(read) == EVENT_FIELDS
    assert read["transform"] == "reveal" and read["token_ids"] == [card["id"]]
    assert read["tenant_id"] == tenant.tenant_id and read["user_agent"] == "ua/1"
    assert read["application_id"] != tenant.application_id  # the reader, not the admin
    assert read["trace_id"] == resp.headers["SVC-TRACE-ID"]


async def test_refusals_are_recorded(client, admin_headers, tenant, reader, auditor):
    card = await create_card(client, admin_headers, containers=["/hr/"])
    assert (await client.get(f"/tokens/{card['id']}", headers=reader)).status == 404
    assert (await client.delete(f"/tokens/{card['id']}", headers=reader)).status == 403
    resp = await client.post("/tokens", data=b"{", headers={**reader,
                                                            "Content-Type": "application/json"})
    assert resp.status in (400, 403)
    events = await logs(client, auditor, token_id=card["id"])
    outcomes = [(e["route"], e["outcome"], e["status"], e["reason"]) for e in events]
    assert ("DELETE /tokens/{id}", "denied", 403, "forbidden") in outcomes
    assert ("GET /tokens/{id}", "not_found", 404, "not-found") in outcomes


async def test_a_401_is_recorded_without_a_tenant_and_shown_to_none(client, auditor):
    trace = uuid.uuid4().hex
    resp = await client.get("/tokens/some-id", headers={"SVC-API-KEY": "vg_nope",
                                                        "SVC-TRACE-ID": trace})
    assert resp.status == 401
    rows = await cypher(client, "MATCH (e:AuditEvent {trace_id: $trace}) "
                                "RETURN e.tenant_id AS t, e.outcome AS o, e.status AS s",
                        trace=trace)
    assert rows == [{"t": None, "o": "denied", "s": 401}]
    assert all(e["trace_id"] != trace for e in await logs(client, auditor))


async def test_events_hold_no_data_masks_metadata_values_or_fingerprints(
        client, admin_headers, reader, auditor):
    card = await create_card(client, admin_headers, metadata={"owner": "meta-canary-value"},
                             mask="{{ data.number | last4 }}")
    await client.get(f"/tokens/{card['id']}", headers=reader)
    await client.patch(f"/tokens/{card['id']}", data=orjson.dumps({"metadata": {"x": "y"}}),
                       headers={**admin_headers, "Content-Type": "application/merge-patch+json"})
    await settle(client)
    rows = await cypher(client, "MATCH (e:AuditEvent) "
                                "WHERE (e.tenant_key IS NOT NULL OR e.tenant_id IS NOT NULL) AND "
                                + NAMES_TOKEN + " RETURN properties(e) AS p",
                        **of_token(card["id"]))
    assert len(rows) >= 3
    text = str(rows)
    stored = (await cypher(client, "MATCH (t:Token {id: $id}) RETURN t.fingerprint AS f",
                           id=card["id"]))[0]["f"]
    for secret in (CANARY, "meta-canary-value", "last4", stored, admin_headers["SVC-API-KEY"]):
        assert secret not in text


async def test_list_events_name_the_returned_tokens_and_count_transforms(
        client, admin_headers, auditor):
    ids = [(await create_card(client, admin_headers, metadata={"batch": "b1"}))["id"]
           for _ in range(3)]
    await client.get("/tokens", params={"metadata.batch": "b1"}, headers=admin_headers)
    [event] = [e for e in await logs(client, auditor, operation="token:read")
               if e["route"] == "GET /tokens"][:1]
    assert sorted(event["token_ids"]) == sorted(ids)
    assert event["transform"] == "reveal"


async def test_a_page_s_event_is_found_by_each_of_its_tokens_and_only_by_its_tenant(
        client, admin_headers, auditor, tenant):
    """An event naming several tokens has an AUDIT_REF self-loop per token holding the
    tenant's key and the token's key and rest (integers, no text; an id that is no UUID has
    no rest): `GET /logs?token_id=` finds it by any of them. Another tenant whose tokens have
    the same ids (chosen by the caller, so the same keys) finds only its own page's event, and
    this tenant only its own."""
    other = await new_tenant(client.server.app, "other")
    theirs = {"SVC-API-KEY": other.key}
    shared = [f"shared-{uuid.uuid4()}" for _ in range(2)]
    mine = [(await create_card(client, admin_headers, metadata={"batch": "p1"}))["id"]]
    for headers in (admin_headers, theirs):
        for token_id in shared:
            await create_card(client, headers, id=token_id, metadata={"batch": "p1"})
    pages = {}
    for name, headers in (("mine", admin_headers), ("theirs", theirs)):
        resp = await client.get("/tokens", params={"metadata.batch": "p1"}, headers=headers)
        assert resp.status == 200
        pages[name] = resp.headers["SVC-TRACE-ID"]
    await settle(client)
    for token_id in [*mine, *shared]:
        found = [e["trace_id"] for e in await logs(client, auditor, token_id=token_id)
                 if e["route"] == "GET /tokens"]
        assert found == [pages["mine"]], token_id
    for token_id in shared:
        found = [e["trace_id"] for e in await logs(client, theirs, token_id=token_id)
                 if e["route"] == "GET /tokens"]
        assert found == [pages["theirs"]], token_id
    assert not await logs(client, theirs, token_id=mine[0])
    refs = await cypher(client, "MATCH (e:AuditEvent {trace_id: $trace})-[r:AUDIT_REF]->(e) "
                                "RETURN r.tenant_key AS tk, r.token_key AS k, r.token_rest AS r, "
                                "r.at = e.at AS at, "
                                "r.tenant_id IS NULL AND r.token_id IS NULL AS no_text",
                        trace=pages["mine"])
    assert sorted((r["k"], r["r"] or 0) for r in refs) == sorted(
        (id_parts(t)[0], id_parts(t)[1] or 0) for t in [*mine, *shared])
    assert {(r["tk"], r["at"], r["no_text"]) for r in refs} == {
        (id_parts(tenant.tenant_id)[0], True, True)}


async def test_tokens_whose_keys_agree_page_through_every_event_naming_them(
        client, admin_headers, auditor):
    """Ids a caller chose as UUIDs whose first halves agree have one key: a seek on it meets
    each page's event once per token, and only the self-loop whose rest is the token's passes,
    so a seek's page is a page of events, not one event repeated, and paging by token reaches
    every event. The page's list of tokens, all UUIDs, is stored as their bytes and read back
    as their text."""
    half = f"{uuid.uuid4()}"[:19]
    same = [f"{half}{n:04d}-{uuid.uuid4().hex[:12]}" for n in range(3)]
    assert len({id_parts(t)[0] for t in same}) == 1 and len(set(same)) == 3
    batch = f"same-key-{uuid.uuid4()}"
    for token_id in same:
        await create_card(client, admin_headers, id=token_id, metadata={"batch": batch})
    pages = []
    for _ in range(3):
        resp = await client.get("/tokens", params={"metadata.batch": batch},
                                headers=admin_headers)
        assert resp.status == 200
        pages.append(resp.headers["SVC-TRACE-ID"])
    await settle(client)
    stored = await cypher(client, "MATCH (e:AuditEvent) WHERE e.trace_id IN $traces "
                                  "RETURN e.token_ids AS ids, "
                                  "COUNT { (e)-[r:AUDIT_REF]->(e) WHERE r.token_rest IS NOT NULL "
                                  "} AS refs", traces=pages)
    assert len(stored) == 3
    for row in stored:
        assert row["refs"] == 3
        assert sorted(uuid.UUID(bytes=bytes(row["ids"][at:at + 16])) for at in range(0, 48, 16)
                      ) == sorted(uuid.UUID(t) for t in same)
    listed = [e for e in await logs(client, auditor, token_id=same[0])
              if e["route"] == "GET /tokens"]
    assert [sorted(e["token_ids"]) for e in listed] == [sorted(same)] * 3
    for token_id in same:
        seen = await every_page(client, auditor, size="1", token_id=token_id,
                                operation="token:read")
        assert [e["trace_id"] for e in seen] == pages[::-1], token_id


# --- durable before the answer, in the write's own transaction --------------------------------

async def test_a_write_and_its_event_commit_together(client, admin_headers, tenant):
    card = await create_card(client, admin_headers, id="tok-audit-1")
    # At the answer, the write's event is already there (written with the token).
    # (The tenant is the test's own: the shared test database keeps other runs' events, and
    # the id is fixed.)
    rows = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr}) WHERE "
                                + NAMES_TOKEN + " "
                                "AND e.route = $route RETURN e.outcome AS o",
                        **of_token(card["id"]), **of_tenant(tenant.tenant_id),
                        route="POST /tokens")
    assert rows == [{"o": "success"}]
    # A refused write (the id is taken) rolls back, event and all; its own event says so.
    resp = await client.post("/tokens", json={"type": "card", "id": "tok-audit-1",
                                              "data": {"number": CANARY}},
                             headers=admin_headers)
    assert resp.status == 409
    await settle(client)  # the first event is linked without holding the answer
    rows = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr}) "
                                "WHERE e.route = $route "
                                "RETURN e.outcome AS o ORDER BY e.at",
                        **of_tenant(tenant.tenant_id), route="POST /tokens")
    assert [r["o"] for r in rows] == ["success", "conflict"]
    pending = await cypher(client, "MATCH (e:PendingAuditEvent "
                                   "{tenant_key: $tk, tenant_rest: $tr}) RETURN e.id",
                           **of_tenant(tenant.tenant_id))
    assert pending == []


async def test_a_write_s_event_is_completed_in_place(client, admin_headers, tenant):
    """The write's statement stores the event; the batch completes that node (what only the
    response knew, and the chain's fields) and leaves its time, which the indexes hold, as the
    write stored it: one node per event, nothing pending, and the chain verifies."""
    gate = asyncio.Event()
    writer = client.server.app[services_key].audit_writer
    real_write = writer._write

    async def held(lane, batch):  # linking waits until the stored skeleton has been read
        await gate.wait()
        await real_write(lane, batch)

    writer._write = held
    try:  # a create with deduplication on: its event stored pending, then linked
        card = await create_card(client, admin_headers | {"User-Agent": "audit-test/1"},
                                 deduplicate_token=True)
        query = ("MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr}) "
                 "WHERE e.route = $route "
                 "RETURN properties(e) AS p, labels(e) AS labels, elementId(e) AS node")
        [skeleton] = await cypher(client, query, **of_tenant(tenant.tenant_id),
                                  route="POST /tokens")
    finally:
        gate.set()
        writer._write = real_write
    await settle(client)
    [done] = await cypher(client, query, **of_tenant(tenant.tenant_id), route="POST /tokens")
    assert sorted(skeleton["labels"]) == ["AuditEvent", "PendingAuditEvent"]
    assert not {"chain", "pending", "token_ids"} & set(skeleton["p"])
    # What the request knew when its write was sent is stored by the write itself, in the form
    # the linked event keeps (audit/context.py stored_skeleton): its one token as the scalar's
    # two integers. Linking writes only the rest (repository/audit.py linked_parts).
    token = tuple(of_token(card["id"])[k] for k in ("ik", "ir"))
    assert (skeleton["p"]["user_agent"], skeleton["p"]["token_key"],
            skeleton["p"]["token_rest"]) == ("audit-test/1", *token)
    assert skeleton["p"]["client_ip"] and "status" not in skeleton["p"]
    assert done["node"] == skeleton["node"] and done["labels"] == ["AuditEvent"]
    assert done["p"]["at"] == skeleton["p"]["at"] and done["p"]["id"] == skeleton["p"]["id"]
    assert "pending" not in done["p"]
    # What linking changed is only what the request learnt after its write (its status, how
    # its answer showed the token) and the chain's fields.
    assert {k for k in {*done["p"], *skeleton["p"]}
            if done["p"].get(k) != skeleton["p"].get(k)} == {
        "status", "transform", "chain", "seq", "mac", "mac_end", "key_version"}
    # The one token is stored as the scalar alone, `prev` not at all (it is the MAC before the
    # event in its chain, where the readers take it), the MAC as raw bytes in two halves
    # (repository/audit.py stored_form), and the tenant's, application's and token's UUIDs as
    # two integers each (audit/ids.py).
    assert (done["p"]["token_key"], done["p"]["token_rest"]) == token
    assert (done["p"]["status"], done["p"]["user_agent"]) == (201, "audit-test/1")
    assert {"chain", "seq", "mac", "mac_end", "key_version"} <= set(done["p"])
    assert not {"prev", "token_ids", "token_id", "tenant_id", "application_id"} & set(done["p"])
    for p in (skeleton["p"], done["p"]):
        assert (p["tenant_key"], p["tenant_rest"]) == tuple(of_tenant(tenant.tenant_id).values())
        assert {"application_key", "application_rest"} <= set(p)
    assert event_of(done["p"])["token_ids"] == [card["id"]]
    assert [len(done["p"]["mac"]), len(done["p"]["mac_end"])] == [16, 16]
    assert await verify_own_chain(client) == []


async def test_a_write_s_event_not_linked_yet_is_found_by_its_token(client, admin_headers,
                                                                     tenant):
    """An event its write stored and no batch has linked (the batch still to come, or its
    process gone) is found among the token's events: the write stores the token in the form
    the index holds, not only as the list a linked event drops."""
    gate = asyncio.Event()
    writer = client.server.app[services_key].audit_writer
    audit_log = client.server.app[services_key].audit_log
    real_write = writer._write

    async def held(lane, batch):
        await gate.wait()
        await real_write(lane, batch)

    writer._write = held
    try:  # a create with deduplication on: its event stored pending, then linked
        card = await create_card(client, admin_headers, deduplicate_token=True)
        pending, _ = await audit_log.page(tenant.tenant_id, LogFilter(token_id=card["id"]),
                                          10, None)
    finally:
        gate.set()
        writer._write = real_write
    await settle(client)
    assert [(e["route"], e["token_ids"], e.get("status")) for e in pending] == [
        ("POST /tokens", [card["id"]], None)]
    linked, _ = await audit_log.page(tenant.tenant_id, LogFilter(token_id=card["id"]), 10, None)
    assert [(e["id"], e["status"]) for e in linked] == [(pending[0]["id"], 201)]


async def test_a_write_whose_commit_went_unconfirmed_has_its_event_linked_once(
        client, admin_headers, tenant, monkeypatch):
    """The write's statement committed, event and all, but the service never saw the commit's
    answer (a deadline, a connection dropped at the wrong moment): the request is answered 503,
    and its stored event is found by id and completed — not created a second time, which the
    id's uniqueness would refuse, failing every event of its batch and leaving it pending."""
    def answer_lost() -> None:
        raise Unavailable("the commit's answer was lost")

    monkeypatch.setattr(audit_context, "written", answer_lost)
    # With deduplication on: its event stored pending (test_write_events.py covers a placed one)
    resp = await client.post("/tokens", json={"type": "card", "data": {"number": CANARY},
                                              "deduplicate_token": True}, headers=admin_headers)
    monkeypatch.undo()
    assert resp.status == 503
    await settle(client)
    rows = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr}) "
                                "WHERE e.route = $route RETURN e.outcome AS outcome, "
                                "e.status AS status, e:PendingAuditEvent AS pending, "
                                "e.chain IS NOT NULL AS chained", **of_tenant(tenant.tenant_id),
                        route="POST /tokens")
    assert rows == [{"outcome": "unavailable", "status": 503, "pending": False,
                     "chained": True}]
    # The change did commit, and it has its one event.
    assert len(await cypher(client, "MATCH (t:Token {tenant_id: $t}) RETURN t.id AS id",
                            t=tenant.tenant_id)) == 1
    assert await verify_own_chain(client) == []


async def test_every_event_time_is_stored_as_the_datetime_it_was_taken(client, admin_headers,
                                                                      tenant, reader):
    """`at` travels to Neo4j as text (repository/audit_prefix.py audited_params) and is stored as a
    zoned DateTime: a write's event (its own statement, completed by the batch) and a read's
    (the batch alone) alike, in the order taken, and the chain over them still verifies."""
    before = datetime.now(UTC)
    card = await create_card(client, admin_headers)
    resp = await client.get(f"/tokens/{card['id']}", headers=reader)
    assert resp.status == 200
    after = datetime.now(UTC)
    await settle(client)
    rows = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr}) WHERE "
                                + NAMES_TOKEN + " "
                                "RETURN e.route AS route, valueType(e.at) AS kind, e.at AS at "
                                "ORDER BY e.at",
                        **of_tenant(tenant.tenant_id), **of_token(card["id"]))
    # As an integer, microseconds since 1970 (docs/adr/0028).
    kind = "INTEGER NOT NULL"
    assert [(r["route"], r["kind"]) for r in rows] == [(route_number("POST /tokens"), kind),
                                                       (route_number("GET /tokens/{id}"), kind)]
    taken = [native(r["at"]) for r in rows]
    assert before <= taken[0] <= taken[1] <= after
    assert taken[0].microsecond or taken[1].microsecond  # not cut to whole seconds
    # Each names the one token as its scalar reference, indexed with the event's time ("all
    # events of token X" seeks on it), and has no AUDIT_REF (kept for events naming several).
    refs = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr}) WHERE "
                                + NAMES_TOKEN + " "
                                "RETURN e.token_key AS ref, COUNT { (e)-[:AUDIT_REF]->() } AS rels",
                        **of_tenant(tenant.tenant_id), **of_token(card["id"]))
    assert refs == [{"ref": of_token(card["id"])["ik"], "rels": 0}] * 2
    assert await verify_own_chain(client) == []


async def test_an_event_that_cannot_be_written_fails_the_read_closed(client, admin_headers,
                                                                    settings):
    card = await create_card(client, admin_headers)
    services = client.server.app[services_key]
    # A real writer on a real driver, pointed where no Neo4j listens: every batch fails.
    down = Database.connect("neo4j://127.0.0.1:9", "neo4j", "unused",
                            services.database.catalog, "neo4j")
    working, services.audit_writer = services.audit_writer, AuditWriter(
        AuditRepository(down), services.keyring)
    try:
        resp = await client.get(f"/tokens/{card['id']}", headers=admin_headers)
        body = await resp.read()
        assert resp.status == 503 and resp.headers["Retry-After"]
        assert CANARY.encode() not in body
    finally:
        await services.audit_writer.stop()
        services.audit_writer = working
        await down.close()


# --- chains ----------------------------------------------------------------------------------

async def test_concurrent_requests_and_rolled_back_writes_leave_a_whole_chain(
        client, admin_headers):
    card = await create_card(client, admin_headers, id="tok-audit-chain")
    requests = [client.get(f"/tokens/{card['id']}", headers=admin_headers) for _ in range(30)]
    requests += [client.post("/tokens", json={"type": "card", "id": "tok-audit-chain",
                                              "data": {"number": CANARY}},
                             headers=admin_headers) for _ in range(5)]
    statuses = sorted(r.status for r in await asyncio.gather(*requests))
    assert statuses == [200] * 30 + [409] * 5
    await settle(client)
    rows = await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs RETURN e.seq AS s "
                                "ORDER BY s", c=chain_of(client))
    assert [r["s"] for r in rows] == list(range(1, len(rows) + 1))
    assert len(rows) >= 31  # the reads' events and the blocks settling the creates'
    # The creates' events, each at its place in the chain of write events, the rolled-back
    # ones written again there as they ended.
    creates = await cypher(client, "MATCH (e:WriteAuditEvent) WHERE e.token_key = $ik "
                                    "RETURN e.status AS status, e.chain AS chain",
                           **of_token("tok-audit-chain"))
    assert sorted(r["status"] for r in creates) == [201] + [409] * 5
    chains = {str(r["chain"]) for r in creates}
    audit_log = client.server.app[services_key].audit_log
    assert await verify_own_chain(client) == []
    assert await audit_log.verify(chains=chains) == []


async def chain_events(client) -> list[dict]:
    await settle(client)
    return await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs RETURN e.id AS id, "
                                "e.seq AS seq ORDER BY seq", c=chain_of(client))


@pytest.fixture
async def six_events(client, admin_headers):
    # With deduplication on, a create cannot say how it ends: its event is stored pending and
    # linked into the lane's chain, beside the reads' (test_write_events.py covers the rest).
    card = await create_card(client, admin_headers, deduplicate_token=True)
    for _ in range(5):
        await client.get(f"/tokens/{card['id']}", headers=admin_headers)
    events = await chain_events(client)
    assert len(events) == 6 and await verify_own_chain(client) == []
    return events


@pytest.fixture(params=["placed", "linked"])
async def six_in_form(request, client, six_events):
    """`six_events` in a chain of each form: placed, as the writer signs it, or signed as a
    writer signed before placed chains (each after the MAC before it, audit/chain.py)."""
    if request.param == "linked":
        await retimed(client, {}, placed=False)
    return six_events


async def test_verify_names_an_edited_event(client, six_in_form):
    await cypher(client, "MATCH (e:AuditEvent {id: $id}) SET e.outcome = 'denied'",
                 id=six_in_form[2]["id"])
    assert await verify_own_chain(client) == [
        f"edited: chain {chain_of(client)} seq 3 (event {six_in_form[2]['id']})"]


async def test_verify_names_a_deleted_event(client, six_in_form):
    await cypher(client, "MATCH (e:AuditEvent {id: $id}) DETACH DELETE e",
                 id=six_in_form[3]["id"])
    assert await verify_own_chain(client) == [f"deleted: chain {chain_of(client)} seq 4"]


async def test_verify_names_a_deleted_tail(client, six_in_form):
    await cypher(client, "MATCH (e:AuditEvent {id: $id}) DETACH DELETE e",
                 id=six_in_form[5]["id"])
    assert await verify_own_chain(client) == [f"deleted: chain {chain_of(client)} seq 6"]


async def test_verify_names_an_inserted_event(client, six_in_form):
    forged = f"forged-{uuid.uuid4()}"  # the shared test database keeps other runs' events
    await cypher(client, "MATCH (e:AuditEvent {id: $id}) WITH properties(e) AS p "
                         "CREATE (f:AuditEvent) SET f = {id: $forged, chain: p.chain, "
                         "seq: p.seq, prev: p.prev, mac: p.mac, at: p.at, outcome: 'success', "
                         "key_version: p.key_version, tenant_id: p.tenant_id}",
                 id=six_in_form[1]["id"], forged=forged)
    assert await verify_own_chain(client) == [
        f"inserted: chain {chain_of(client)} seq 2 (event {forged})"]


async def test_verify_names_reordered_events(client, six_in_form):
    await cypher(client, "MATCH (a:AuditEvent {id: $a}), (b:AuditEvent {id: $b}) "
                         "SET a.seq = 5, b.seq = 2", a=six_in_form[1]["id"], b=six_in_form[4]["id"])
    found = await verify_own_chain(client)
    assert sorted(found) == sorted([
        f"reordered: chain {chain_of(client)} seq 2 (event {six_in_form[4]['id']})",
        f"reordered: chain {chain_of(client)} seq 5 (event {six_in_form[1]['id']})"])


async def test_the_writer_s_chain_is_placed_so_the_event_after_a_deleted_one_is_checked(
        client, six_events):
    """Each event of the writer's chain is signed at its own place (audit/chain.py): a deletion
    together with an edit of the event after it names both, and the chain's mark taken off is
    named, its events still read as they were signed."""
    chain = chain_of(client)
    assert await cypher(client, "MATCH (c:AuditChain {id: $c}) RETURN c.placed AS placed",
                        c=chain) == [{"placed": True}]
    await cypher(client, "MATCH (e:AuditEvent {id: $id}) DETACH DELETE e", id=six_events[3]["id"])
    await cypher(client, "MATCH (e:AuditEvent {id: $id}) SET e.outcome = 'denied'",
                 id=six_events[4]["id"])
    assert await verify_own_chain(client) == [
        f"deleted: chain {chain} seq 4",
        f"edited: chain {chain} seq 5 (event {six_events[4]['id']})"]
    await cypher(client, "MATCH (c:AuditChain {id: $c}) REMOVE c.placed", c=chain)
    assert await verify_own_chain(client) == [
        f"edited: chain {chain} (event placed mark)", f"deleted: chain {chain} seq 4",
        f"edited: chain {chain} seq 5 (event {six_events[4]['id']})"]


async def test_an_export_gives_a_placed_chain_s_events_no_prev_and_each_verifies_on_its_own(
        client, six_events):
    await retimed(client, dict.fromkeys(range(1, 7), datetime(1990, 1, 1, tzinfo=UTC)))
    audit_log = client.server.app[services_key].audit_log
    since, until = datetime(1989, 1, 1, tzinfo=UTC), datetime(1991, 1, 1, tzinfo=UTC)
    exported = [e async for e in audit_log._repo.export(since=since, until=until)
                if e.get("chain") == chain_of(client)]
    assert sorted(e["seq"] for e in exported) == [1, 2, 3, 4, 5, 6]
    for event in exported:
        assert event["prev"] is None
        assert sign(audit_log._ring, event) == event["mac"]


async def checkpoint_of(client) -> int | None:
    rows = await cypher(client, "MATCH (k:AuditCheckpoint {chain: $c}) RETURN k.seq AS seq",
                        c=chain_of(client))
    return rows[0]["seq"] if rows else None


async def retimed(client, times: dict[int, datetime], *, placed: bool = True) -> None:
    """The own chain as if its events at these sequence numbers had been made at these times
    (and signed so by the writer; not `placed`, by a writer before placed chains): a chain
    whose link order and time order differ."""
    await retime_chain(client.server.app[services_key], chain_of(client),
                       lambda e: times.get(e["seq"], e["at"]), placed=placed)
    assert await verify_own_chain(client) == []


def held_back(caplog, chain: str) -> list[str]:
    """The defects a prune named, for not pruning `chain` past them."""
    return [r.defect for r in caplog.records if getattr(r, "chain", None) == chain
            and r.getMessage().startswith("audit chain not pruned past")]


async def test_a_pruned_chain_still_verifies_from_its_checkpoint(client, six_events):
    pruner = client.server.app[services_key].audit_pruner
    ats = {r["seq"]: native(r["at"]) for r in await cypher(
        client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs RETURN e.seq AS seq, e.at AS at",
        c=chain_of(client))}
    cutoff = ats[4]  # the driver's own DateTime: exact to the nanosecond
    await pruner.prune_before(cutoff)  # (other tests' chains are pruned as well)
    left = [e["seq"] for e in await chain_events(client)]
    # Only the chain's prefix older than the cutoff goes: the survivors run on from the
    # checkpoint to the tail (a write's event may be linked after a later read's, so the
    # prefix need not be seq 1-3).
    assert left == list(range(left[0], 7))
    assert all(ats[s] < cutoff for s in range(1, left[0])) and ats[left[0]] >= cutoff
    assert await checkpoint_of(client) == (left[0] - 1 or None)
    assert await verify_own_chain(client) == []
    if left[0] > 1:
        await cypher(client, "MATCH (k:AuditCheckpoint {chain: $c}) SET k.seq = k.seq - 1",
                     c=chain_of(client))
        assert any(f.startswith("edited:") for f in await verify_own_chain(client))


async def test_a_prune_leaves_nothing_of_a_chain_below_its_checkpoint(client, six_events,
                                                                       caplog):
    """Link order and time order differ by the requests in flight together: here seq 2 is
    newer than the cutoff and seq 1 and 3 older. Only seq 1 goes (seq 3 waits for seq 2), so
    a later deletion of seq 2 is named; and a prune never goes past a gap."""
    old, new = datetime(1990, 1, 1, tzinfo=UTC), datetime.now(UTC)
    await retimed(client, {1: old, 2: new, 3: old})
    pruner = client.server.app[services_key].audit_pruner
    cutoff = datetime(2000, 1, 1, tzinfo=UTC)
    assert await pruner.prune_before(cutoff) >= 1
    assert [e["seq"] for e in await chain_events(client)] == [2, 3, 4, 5, 6]
    assert await checkpoint_of(client) == 1
    await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs AND e.seq = 2 "
                         "DETACH DELETE e", c=chain_of(client))
    assert await verify_own_chain(client) == [f"deleted: chain {chain_of(client)} seq 2"]
    await pruner.prune_before(cutoff)  # seq 3 is old, but past the gap
    assert [e["seq"] for e in await chain_events(client)] == [3, 4, 5, 6]
    assert held_back(caplog, chain_of(client)) == ["gap"]
    assert await verify_own_chain(client) == [f"deleted: chain {chain_of(client)} seq 2"]


@pytest.mark.parametrize(("tamper", "defect", "found"), [
    ("MATCH (e:AuditEvent) WHERE e.chain IN $cs AND e.seq = 3 SET e.outcome = 'denied'",
     "MAC does not hold", "edited: chain {c} seq 3"),
    ("MATCH (e:AuditEvent) WHERE e.chain IN $cs AND e.seq = 3 WITH properties(e) AS p "
     "CREATE (f:AuditEvent) SET f = p {.*, id: 'forged-' + randomUUID(), mac: 'forged'}",
     "two events at one number", "inserted: chain {c} seq 3"),
])
async def test_a_prune_stops_before_a_tampered_event_and_signs_no_forged_mac(
        client, six_events, caplog, tamper, defect, found):
    """An event a prune would delete next that does not continue the chain (edited: its MAC;
    a second one at its number: forged) stops it there: the evidence stays for `verify`, and no
    checkpoint is signed over a MAC the writer did not make."""
    await retimed(client, dict.fromkeys(range(1, 7), datetime(1990, 1, 1, tzinfo=UTC)))
    chain = chain_of(client)
    await cypher(client, tamper, c=chain)
    audit_log = client.server.app[services_key].audit_log
    pruner = client.server.app[services_key].audit_pruner
    await pruner.prune_before(datetime(2000, 1, 1, tzinfo=UTC), batch=2)
    assert await checkpoint_of(client) == 2
    assert sorted({e["seq"] for e in await chain_events(client)}) == [3, 4, 5, 6]
    assert held_back(caplog, chain) == [defect]
    assert [f.describe().split(" (")[0] for f in await audit_log.verify(chains={chain})] == [
        found.format(c=chain)]


def read_with(client, ring: KeyRing) -> AuditLog:
    """The trail as a process with this key ring reads it."""
    return AuditLog(client.server.app[services_key].audit_log._repo, ring)


def rotated(ring: KeyRing) -> KeyRing:
    """The key ring after a key-encryption key rotation: a new version, active."""
    return KeyRing({**{v: ring.kek(v) for v in ring.versions}, "rotated": os.urandom(32)},
                   "rotated")


async def pruned_to_3(client) -> None:
    """The own chain with seq 1-3 pruned (old) and a checkpoint at 3; seq 4-6 left."""
    await retimed(client, dict.fromkeys(range(1, 4), datetime(1990, 1, 1, tzinfo=UTC)))
    pruner = client.server.app[services_key].audit_pruner
    await pruner.prune_before(datetime(2000, 1, 1, tzinfo=UTC))
    assert await checkpoint_of(client) == 3
    assert [e["seq"] for e in await chain_events(client)] == [4, 5, 6]


async def test_a_checkpoint_verifies_under_the_key_version_it_names_after_a_rotation(
        client, six_events):
    """A prune signs its checkpoint under the active key version and names it, so it verifies
    under that version once another is active; one stored before checkpoints named their
    version verifies under whichever version of the ring it holds under. A checkpoint whose
    signature was edited is named, and so is one made to name another version while its
    chain's events hold."""
    chain = chain_of(client)
    ring = client.server.app[services_key].audit_log._ring
    await pruned_to_3(client)
    after = read_with(client, rotated(ring))
    assert await after.verify(chains={chain}) == []
    assert await cypher(client, "MATCH (k:AuditCheckpoint {chain: $c}) "
                                "RETURN k.key_version AS version", c=chain) == [
        {"version": ring.active}]
    edited = [f"edited: chain {chain} seq 3 (event checkpoint)"]
    forged = "00" * 32
    await cypher(client, "MATCH (k:AuditCheckpoint {chain: $c}) SET k.key_version = 'rotated'",
                 c=chain)
    assert [f.describe() for f in await after.verify(chains={chain})] == edited
    await cypher(client, "MATCH (k:AuditCheckpoint {chain: $c}) SET k.key_version = $v, "
                         "k.sig = $forged", c=chain, v=ring.active, forged=forged)
    assert [f.describe() for f in await after.verify(chains={chain})] == edited
    # Stored before checkpoints named their key version: signed under the version active then.
    await cypher(client, "MATCH (k:AuditCheckpoint {chain: $c}) SET k.sig = $sig "
                         "REMOVE k.key_version", c=chain,
                 sig=client.server.app[services_key].audit_log.checkpoint_sig(
                     chain, 3, (await checkpoint_mac(client))))
    assert await after.verify(chains={chain}) == []
    await cypher(client, "MATCH (k:AuditCheckpoint {chain: $c}) SET k.sig = $forged", c=chain,
                 forged=forged)
    assert [f.describe() for f in await after.verify(chains={chain})] == edited


async def checkpoint_mac(client) -> str:
    rows = await cypher(client, "MATCH (k:AuditCheckpoint {chain: $c}) RETURN k.mac AS mac",
                        c=chain_of(client))
    return rows[0]["mac"]


async def test_a_key_the_ring_lacks_or_that_did_not_sign_is_named_not_read_as_tampering(
        client, six_events):
    """Read with a key ring that lacks the version the chain is signed under, or whose key of
    that version did not sign it, the chain is one `KeyProblem` naming the version (not an
    edit of each event and of the checkpoint); under the right key an edit is named as ever,
    and so is an event naming a version the ring lacks in a chain whose other events hold."""
    chain = chain_of(client)
    ring = client.server.app[services_key].audit_log._ring
    wrong = read_with(client, KeyRing({ring.active: os.urandom(32)}, ring.active))
    lacking = read_with(client, KeyRing({"other": os.urandom(32)}, "other"))
    assert await wrong.verify(chains={chain}) == [KeyProblem(ring.active, False, 6, 0)]
    assert await lacking.verify(chains={chain}) == [KeyProblem(ring.active, True, 6, 0)]
    assert [f.describe() for f in await lacking.verify(chains={chain})] == [
        f"key version {ring.active} is not in the key ring (6 event(s) signed under it)"]
    await pruned_to_3(client)
    assert await wrong.verify(chains={chain}) == [KeyProblem(ring.active, False, 3, 1)]
    await cypher(client, "MATCH (e:AuditEvent {id: $id}) SET e.outcome = 'denied'",
                 id=six_events[4]["id"])
    assert await verify_own_chain(client) == [
        f"edited: chain {chain} seq 5 (event {six_events[4]['id']})"]
    assert await wrong.verify(chains={chain}) == [KeyProblem(ring.active, False, 3, 1)]
    await cypher(client, "MATCH (e:AuditEvent {id: $id}) SET e.key_version = 'k-none'",
                 id=six_events[3]["id"])
    assert await verify_own_chain(client) == [
        f"edited: chain {chain} seq 4 (event {six_events[3]['id']})",
        f"edited: chain {chain} seq 5 (event {six_events[4]['id']})"]


async def test_a_checkpoint_that_fails_in_a_chain_whose_events_hold_is_an_edit(client,
                                                                                six_events):
    """A checkpoint edited to name a version no key holds under, or stored before checkpoints
    named one and moved forward, in a chain whose events verify, is named edited: it must not
    pass for a key problem (exit 3) however the rest of the trail reads."""
    chain = chain_of(client)
    await pruned_to_3(client)
    assert await verify_own_chain(client) == []
    await cypher(client, "MATCH (k:AuditCheckpoint) WHERE k.chain IN $cs "
                         "SET k.key_version = 'k-bogus'", c=chain)
    assert await verify_own_chain(client) == [f"edited: chain {chain} seq 3 (event checkpoint)"]
    await cypher(client, "MATCH (k:AuditCheckpoint) WHERE k.chain IN $cs "
                         "REMOVE k.key_version SET k.seq = 4", c=chain)
    assert await verify_own_chain(client) == [f"edited: chain {chain} seq 4 (event checkpoint)"]


async def as_before_0028(client, chain: str, seqs: range | None = None) -> None:
    """The chain's events (those at `seqs`, or all) with the chain's id and the route as text
    and their time as a DateTime (their AUDIT_REFs' too), as versions before docs/adr/0028
    stored them."""
    await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs "
                         "AND ($seqs IS NULL OR e.seq IN $seqs) SET e.chain = toString(e.chain), "
                         "e.route = CASE WHEN e.route IS :: INTEGER THEN $routes[e.route - 1] "
                         "ELSE e.route END "
                         "WITH e WHERE e.at IS :: INTEGER "
                         "SET e.at = datetime({epochSeconds: e.at / 1000000, "
                         "                     nanosecond: e.at % 1000000 * 1000}) "
                         "WITH e OPTIONAL MATCH (e)-[r:AUDIT_REF]->(e) SET r.at = e.at",
                 c=chain, seqs=list(seqs) if seqs is not None else None, routes=list(ROUTES))


async def ids_as_text(client, chain: str, seqs: range | None = None) -> None:
    """The chain's events (those at `seqs`, or all) with their tenant's, application's, token's
    and key's ids as text, as versions before docs/adr/0026 stored them (and no integers), and
    the chain's id and time as versions before docs/adr/0028 did."""
    await as_before_0028(client, chain, seqs)
    events = [e async for e in client.server.app[services_key].audit_log._repo
              .chain_events(chain)]
    await cypher(client, "UNWIND $rows AS r MATCH (e:AuditEvent) "
                         "WHERE e.chain IN $cs AND e.seq = r.seq "
                         "SET e.tenant_id = r.tenant_id, e.application_id = r.application_id, "
                         "e.token_id = r.token_id, e.key_id = r.key_id "
                         "REMOVE e.tenant_key, e.tenant_rest, e.application_key, "
                         "e.application_rest, e.token_key, e.token_rest", c=chain,
                 rows=[{"seq": e["seq"], "tenant_id": e["tenant_id"],
                        "application_id": e["application_id"], "key_id": e["key_id"],
                        "token_id": e["token_ids"][0] if len(e["token_ids"]) == 1 else None}
                       for e in events if seqs is None or e["seq"] in seqs])


async def stored_as_before(client, chain: str, seqs: range | None = None) -> list[dict]:
    """The chain's events (those at `seqs`, or all) as versions before docs/adr/0024 stored
    them: each with its `prev` (the MAC before it), its list of tokens (beside the scalar of
    one), its MAC as hex text and its ids as text. Returns the chain's events as read, with
    their `prev`."""
    events = [e async for e in client.server.app[services_key].audit_log._repo
              .chain_events(chain)]
    prev = ""
    for event in events:
        event["prev"], prev = prev, event["mac"]
    await cypher(client, "UNWIND $rows AS r MATCH (e:AuditEvent) "
                         "WHERE e.chain IN $cs AND e.seq = r.seq "
                         "SET e.prev = r.prev, e.mac = r.mac, e.token_ids = r.token_ids "
                         "REMOVE e.mac_end", c=chain,
                 rows=[{k: e[k] for k in ("seq", "prev", "mac", "token_ids")} for e in events
                       if seqs is None or e["seq"] in seqs])
    await ids_as_text(client, chain, seqs)
    return events


async def test_events_stored_before_fields_were_left_out_still_verify_list_export_and_prune(
        client, six_events):
    """A store upgraded in place, four times: a chain signed before placed chains (each event
    after the MAC before it, audit/chain.py), its first events as versions before
    docs/adr/0024 stored them (`prev`, the list of one token, a hex MAC, the ids and the chain's
    id as text, the time as a DateTime), the fourth as versions before docs/adr/0026 did (the
    ids and the chain's id as text, the time as a DateTime), the fifth as versions before
    docs/adr/0028 did (the chain's id and the route as text, the time as a DateTime), the sixth
    as this one does. The chain verifies across the four, `GET /logs` answers as before under
    every filter (the text indexes' seeks and the integers' merged), the export gives every
    event its `prev` and whole MAC (each verifies on its own; the event before found whichever
    form its chain's id takes), an edit of a stored `prev` is named, and a prune
    takes the mixed prefix."""
    chain = chain_of(client)
    services = client.server.app[services_key]
    audit_log = services.audit_log
    await retimed(client, dict.fromkeys(range(1, 7), datetime(1990, 1, 1, tzinfo=UTC)),
                  placed=False)
    first = await anext(audit_log._repo.chain_events(chain))
    token, tenant_id = first["token_ids"][0], first["tenant_id"]
    filters = [LogFilter(token_id=token), LogFilter(),
               LogFilter(application_id=first["application_id"]),
               LogFilter(operation="token:read"), LogFilter(outcome="success")]
    # (read as GET /logs reads, without a request: one would go on the chain re-signed here)
    listed = [await audit_log.page(tenant_id, f, 50, None) for f in filters]
    assert {e["id"] for e in six_events} == {e["id"] for e in listed[0][0]}
    assert {e["id"] for e in six_events} <= {e["id"] for e in listed[1][0]}
    events = await stored_as_before(client, chain, range(1, 4))
    await ids_as_text(client, chain, range(4, 5))
    await as_before_0028(client, chain, range(5, 6))
    stored = await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs RETURN e.seq AS seq, "
                                  "e.prev IS NOT NULL AS prev, valueType(e.mac) AS mac, "
                                  "e.tenant_id IS NULL AND e.tenant_key IS NOT NULL "
                                  "AND valueType(e.key_id) STARTS WITH 'LIST' AS keys, "
                                  "valueType(e.chain) + ' ' + valueType(e.at) + ' ' "
                                  "+ valueType(e.route) AS since_0028 "
                                  "ORDER BY seq", c=chain)
    before_0028 = "STRING NOT NULL ZONED DATETIME NOT NULL STRING NOT NULL"
    now = "INTEGER NOT NULL INTEGER NOT NULL INTEGER NOT NULL"
    assert [(r["prev"], r["mac"].split()[0], r["keys"], r["since_0028"]) for r in stored] == (
        [(True, "STRING", False, before_0028)] * 3
        + [(False, "LIST<INTEGER", False, before_0028)]
        + [(False, "LIST<INTEGER", True, before_0028), (False, "LIST<INTEGER", True, now)])
    assert await verify_own_chain(client) == []
    assert [await audit_log.page(tenant_id, f, 50, None) for f in filters] == listed
    since, until = datetime(1989, 1, 1, tzinfo=UTC), datetime(1991, 1, 1, tzinfo=UTC)
    exported = {e["id"]: e async for e in audit_log._repo.export(since=since, until=until)
                if e.get("chain") == chain}
    assert sorted(e["seq"] for e in exported.values()) == [1, 2, 3, 4, 5, 6]
    for event in events:
        assert (exported[event["id"]]["prev"], exported[event["id"]]["mac"]) == (
            event["prev"], event["mac"])
        assert sign(audit_log._ring, exported[event["id"]]) == event["mac"]
    assert {e["tenant_id"] for e in exported.values()} == {tenant_id}
    await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs AND e.seq = 2 "
                         "SET e.prev = $forged", c=chain, forged="00" * 32)
    assert await verify_own_chain(client) == [f"edited: chain {chain} seq 2 "
                                              f"(event {six_events[1]['id']})"]
    await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs AND e.seq = 2 "
                         "SET e.prev = $prev", c=chain, prev=events[1]["prev"])
    await services.audit_pruner.prune_before(datetime(2000, 1, 1, tzinfo=UTC))
    assert await chain_events(client) == []
    assert await checkpoint_of(client) == 6
    assert await verify_own_chain(client) == []


async def test_an_upgrade_drops_the_unique_index_on_every_event_s_id(client, six_events):
    """A store made by an earlier version has a unique index on every event's id; the schema
    applied at start-up drops it, and keeps ids unique among the events writes stored and the
    writer has yet to link (linking finds them by id; a write's transaction run twice is
    refused)."""
    db = database(client.server.app)
    await cypher(client, "CREATE CONSTRAINT audit_event_id IF NOT EXISTS "
                         "FOR (e:AuditEvent) REQUIRE e.id IS UNIQUE")
    await db.apply_schema()
    names = {r["name"] for r in await cypher(client, "SHOW CONSTRAINTS YIELD name")}
    assert "audit_event_id" not in names and "audit_pending_event_id" in names
    pending = f"pending-{uuid.uuid4()}"
    await cypher(client, "CREATE (:AuditEvent:PendingAuditEvent {id: $id})", id=pending)
    with pytest.raises(ConstraintError):
        await cypher(client, "CREATE (:AuditEvent:PendingAuditEvent {id: $id})", id=pending)
    await cypher(client, "MATCH (e:PendingAuditEvent {id: $id}) DETACH DELETE e", id=pending)
    assert await verify_own_chain(client) == []


async def test_the_schema_indexes_the_ids_integers_and_keeps_the_text_s_indexes(client):
    """Applied at every start-up, the schema keeps an index per `GET /logs` filter on the ids'
    integers (docs/adr/0026), none on (tenant_key, at) alone, and the indexes on the ids' text
    that events stored before are found by; applied again, it changes nothing."""
    db = database(client.server.app)
    shown = ("SHOW INDEXES YIELD name, labelsOrTypes, properties, type "
             "WHERE name STARTS WITH 'audit_' RETURN name, labelsOrTypes, properties, type")
    before = await cypher(client, shown)
    await db.apply_schema()
    await db.apply_schema()
    after = await cypher(client, shown)
    assert sorted(after, key=str) == sorted(before, key=str)
    indexed = {tuple(r["properties"]) for r in after if r["labelsOrTypes"] == ["AuditEvent"]
               and r["type"] == "RANGE"}
    assert {("tenant_key", "application_key", "at"), ("tenant_key", "operation", "at"),
            ("tenant_key", "outcome", "at"), ("tenant_key", "token_key", "at"),
            ("tenant_id", "at"), ("tenant_id", "application_id", "at"),
            ("tenant_id", "operation", "at"), ("tenant_id", "outcome", "at"),
            ("tenant_id", "token_id", "at"), ("chain", "seq"), ("at",)} <= indexed
    assert ("tenant_key", "at") not in indexed


async def pruned_by_time_alone(client, six_events) -> None:
    """What a prune that went by time alone (before prunes took only a chain's prefix) could
    leave: seq 1 and 3 pruned, the checkpoint at 3, seq 2 (a write's event linked after a later
    read's) left below it. Only versions that stored each event's `prev` pruned so: the chain
    is stored as they stored it, signed as they signed it (each event after the MAC before)."""
    audit_log = client.server.app[services_key].audit_log
    chain = chain_of(client)
    await retimed(client, {}, placed=False)
    events = await stored_as_before(client, chain)
    third = events[2]
    gone = [events[0], events[2]]
    await audit_log._repo.prune(gone, [{"chain": chain, "seq": 3, "mac": third["mac"],
                                        "sig": audit_log.checkpoint_sig(chain, 3, third["mac"])}])
    assert [e["seq"] for e in await chain_events(client)] == [2, 4, 5, 6]


async def test_a_prune_deletes_old_events_out_of_every_chain_s_order(client, six_events):
    """An event left below its chain's checkpoint, one a write stored but never linked (its
    process died), and one in a chain no writer started: `verify` names the two that are in no
    chain's order, and they go by time alone."""
    audit_log = client.server.app[services_key].audit_log
    pruner = client.server.app[services_key].audit_pruner
    await retimed(client, {2: datetime(1990, 1, 1, tzinfo=UTC)})
    await pruned_by_time_alone(client, six_events)
    strays = [f"orphan-{uuid.uuid4()}", f"stray-{uuid.uuid4()}"]
    await cypher(client, "CREATE (:AuditEvent:PendingAuditEvent {id: $ids[0], "
                         "at: datetime('1990-01-01T00:00:00Z'), pending: true}) "
                         "CREATE (:AuditEvent {id: $ids[1], chain: 'nobody', seq: 1, "
                         "at: datetime('1990-01-01T00:00:00Z')})", ids=strays)
    found = {f.event_id: f.kind for f in await audit_log.verify() if f.event_id in strays}
    assert found == dict.fromkeys(strays, "unlinked")
    assert await pruner.prune_before(datetime(2000, 1, 1, tzinfo=UTC), batch=1) >= 3
    assert [e["seq"] for e in await chain_events(client)] == [4, 5, 6]
    assert not await cypher(client, "MATCH (e:AuditEvent) WHERE e.id IN $ids RETURN e",
                            ids=strays)
    assert await verify_own_chain(client) == []


async def test_an_event_a_prune_left_below_its_checkpoint_is_still_checked(client, six_events):
    """An event a prune left below its chain's checkpoint still verifies, and an edit of it is
    named."""
    await pruned_by_time_alone(client, six_events)
    assert await verify_own_chain(client) == []
    await cypher(client, "MATCH (e:AuditEvent {id: $id}) SET e.outcome = 'denied'",
                 id=six_events[1]["id"])
    assert await verify_own_chain(client) == [
        f"edited: chain {chain_of(client)} seq 2 (event {six_events[1]['id']})"]


async def test_an_export_pages_through_events_of_one_instant(client, six_events):
    """An expiry sweep's batch stamps its events with one time: a page that ends inside such a
    run goes on after the last one it saw (a cursor made of the time as read would compare
    unequal to the stored one, and skip the rest of the run)."""
    audit_log = client.server.app[services_key].audit_log
    await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs SET e.at = $at",
                 c=chain_of(client), at=at_number(datetime(1990, 1, 1, tzinfo=UTC)))
    since, until = datetime(1989, 1, 1, tzinfo=UTC), datetime(1991, 1, 1, tzinfo=UTC)
    own = {e["id"] for e in six_events}
    exported = [e["id"] async for e in audit_log._repo.export(since=since, until=until, page=2)]
    assert sorted(i for i in exported if i in own) == sorted(own)  # each once


# --- reading the trail -------------------------------------------------------------------------

async def test_logs_need_log_read_and_show_only_the_own_tenant(client, admin_headers, reader,
                                                              auditor):
    assert (await client.get("/logs", headers=reader)).status == 403
    other = await new_tenant(client.server.app, "other")
    theirs = await logs(client, {"SVC-API-KEY": other.key})
    mine = await logs(client, auditor)
    assert mine and all(e["tenant_id"] != other.tenant_id for e in mine)
    assert all(e["tenant_id"] == other.tenant_id for e in theirs)


async def test_logs_page_newest_first_with_filters(client, admin_headers, auditor, tenant):
    card = await create_card(client, admin_headers)
    for _ in range(4):
        await client.get(f"/tokens/{card['id']}", headers=admin_headers)
    seen, start = [], None
    while True:
        params = {"size": "2", "token_id": card["id"], "application_id": tenant.application_id}
        if start:
            params["start"] = start
        resp = await client.get("/logs", params=params, headers=auditor)
        body = await resp.json()
        seen += body["data"]
        start = body["pagination"]["next"]
        if not start:
            break
    assert len(seen) == 5 and len({e["id"] for e in seen}) == 5
    ats = [e["at"] for e in seen]
    assert ats == sorted(ats, reverse=True)
    assert [e["operation"] for e in seen][-1] == "token:create"
    later = (await logs(client, auditor, token_id=card["id"], start_date=seen[1]["at"]))
    assert [e["id"] for e in later] == [e["id"] for e in seen[:2]]
    denied = await logs(client, auditor, outcome="denied")
    assert all(e["outcome"] == "denied" for e in denied)


async def test_logs_page_through_events_of_one_instant(client, six_events, auditor):
    """Whichever index a filter reads, a page that ends inside a run of events of one instant
    goes on after the last one it saw: each event once, ties newest id first."""
    await settle(client)  # the auditor's application's event is linked into the chain first
    await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs SET e.at = $at "
                         "WITH e MATCH (e)-[r:AUDIT_REF]->(e) SET r.at = e.at",
                 c=chain_of(client), at=at_number(datetime(1990, 1, 1, tzinfo=UTC)))
    events = await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs "
                                  "RETURN properties(e) AS p", c=chain_of(client))
    # The chain's events: the six, and any other request's in the same chain (the auditor's).
    own = sorted((event_of(e["p"]) for e in events), key=lambda e: e["id"], reverse=True)
    read = next(e for e in own if e.get("token_ids"))
    token = read["token_ids"][0]
    for filters in ({}, {"token_id": token}, {"application_id": read["application_id"]},
                    {"operation": "token:read"}, {"outcome": "success"}):
        seen = [e["id"] for e in await every_page(client, auditor, size="2", **filters)]
        wanted = [e["id"] for e in own
                  if all(token in (e.get("token_ids") or []) if k == "token_id" else e.get(k) == v
                         for k, v in filters.items())]
        assert wanted and [i for i in seen if i in set(wanted)] == wanted, filters


def _operators(plan) -> list[tuple[str, int]]:
    """(operator, rows) of every operator of a PROFILE plan."""
    out = [(plan["operatorType"].split("@")[0], plan.get("rows", 0))]
    for child in plan.get("children", []):
        out += _operators(child)
    return out


TOK, APP = str(uuid.uuid4()), str(uuid.uuid4())


@pytest.mark.parametrize(("statement", "filters"), [
    ("audit/list", {}), ("audit/list_by_application", {"application_id": APP}),
    ("audit/list_by_operation", {"operation": "token:read"}),
    ("audit/list_by_outcome", {"outcome": "success"}),
    ("audit/list_by_token", {"token_id": TOK})])
async def test_a_page_of_the_trail_reads_a_page_not_the_trail(client, statement, filters):
    """A page of /logs seeks its index in order and stops at the page, wherever the cursor
    stands: never every event of the tenant sorted for each page (PROFILE's rows)."""
    tenant = str(uuid.uuid4())
    # Every shape of an event, interleaved: its ids as integers (docs/adr/0026) or as text
    # (events stored before); naming the token alone (the scalar) or among others (an
    # AUDIT_REF self-loop per token, holding the ids' keys, or their text as every event of
    # older versions); its time as an integer (docs/adr/0028) or as a DateTime (events stored
    # before).
    ids = query_ids(tenant_id=tenant, application_id=APP, token_id=TOK)
    await cypher(client, "UNWIND range(1, 150) AS i "
                         "CREATE (e:AuditEvent {id: $t + '-' + toString(1000 + i), "
                         "  operation: 'token:read', outcome: 'success', "
                         "  at: datetime('2020-01-01T00:00:00Z') + duration({seconds: i / 3})}) "
                         "FOREACH (_ IN CASE WHEN i % 5 < 3 THEN [1] ELSE [] END | "
                         "  SET e.at = e.at.epochSeconds * 1000000 + e.at.microsecond) "
                         "FOREACH (_ IN CASE WHEN i % 3 = 0 THEN [1] ELSE [] END | "
                         "  SET e.tenant_id = $t, e.application_id = $app) "
                         "FOREACH (_ IN CASE WHEN i % 3 > 0 THEN [1] ELSE [] END | "
                         "  SET e.tenant_key = $tk, e.tenant_rest = $tr, "
                         "      e.application_key = $ak, e.application_rest = $ar) "
                         "FOREACH (_ IN CASE WHEN i % 2 = 0 AND i % 3 = 0 THEN [1] ELSE [] END | "
                         "  SET e.token_ids = [$tok], e.token_id = $tok) "
                         "FOREACH (_ IN CASE WHEN i % 2 = 0 AND i % 3 > 0 THEN [1] ELSE [] END | "
                         "  SET e.token_key = $ik, e.token_rest = $ir) "
                         "FOREACH (_ IN CASE WHEN i % 2 = 1 THEN [1] ELSE [] END | "
                         "  SET e.token_ids = [$tok, 'other']) "
                         "FOREACH (_ IN CASE WHEN i % 4 = 1 THEN [1] ELSE [] END | "
                         "  CREATE (e)-[:AUDIT_REF {tenant_id: $t, token_id: $tok, at: e.at}]->(e)"
                         "  CREATE (e)-[:AUDIT_REF {tenant_id: $t, token_id: 'other', at: e.at}]"
                         "->(e)) "
                         "FOREACH (_ IN CASE WHEN i % 4 = 3 THEN [1] ELSE [] END | "
                         "  CREATE (e)-[:AUDIT_REF {tenant_key: $tk, token_key: $ik, "
                         "                         token_rest: $ir, at: e.at}]->(e)"
                         "  CREATE (e)-[:AUDIT_REF {tenant_key: $tk, token_key: $ok, at: e.at}]"
                         "->(e))",
                 t=tenant, app=APP, tok=TOK, tk=ids["tenant_key"], tr=ids["tenant_rest"],
                 ak=ids["application_key"], ar=ids["application_rest"], ik=ids["token_key"],
                 ir=ids["token_rest"], ok=id_parts("other")[0])
    db = database(client.server.app)
    params = {**query_ids(tenant_id=tenant, token_id=None, application_id=None),
              "operation": None, "outcome": None, "outcomes": list(OUTCOMES),
              "limit": 11}
    params.update(query_ids(**{k: v for k, v in filters.items() if k.endswith("_id")}))
    params.update({k: v for k, v in filters.items() if not k.endswith("_id")})
    mine = "MATCH (e:AuditEvent) WHERE e.id STARTS WITH $t "
    try:
        newest = await cypher(client, mine + "RETURN e.at AS at, e.id AS id, CASE WHEN "
                                             "e.at IS :: INTEGER THEN e.at ELSE e.at.epochSeconds "
                                             "* 1000000 + e.at.microsecond END AS instant "
                                             "ORDER BY instant DESC, id DESC", t=tenant)
        assert len(newest) == 150
        for cursor in (None, newest[40], newest[140]):
            before = (END, "") if cursor is None else (native(cursor["at"]), cursor["id"])
            records, summary, _ = await db.driver.execute_query(
                "PROFILE " + db.catalog.text(statement),
                {**params, "before_id": before[1],
                 "times": time_forms(since=BEGINNING, until=END, before=before[0])},
                database_=db.database)
            page = [e["id"] for e in records[0]["events"]]
            after = newest if cursor is None else newest[newest.index(cursor) + 1:]
            assert page == [e["id"] for e in after[:11]], (statement, cursor)
            operators = _operators(summary.profile)
            # Each seek reads the page, and at most the rest of one instant's run (three events
            # share each); the seeks' pages (one per shape: two, three for a token; for every
            # event, one per outcome and the text's; each once per form of the time) merged are
            # the only rows sorted.
            seeks = 2 * {"audit/list_by_token": 4, "audit/list": len(OUTCOMES) + 1}.get(
                statement, 2)
            # (A seek operator runs once per form of the time: its rows are both runs'.)
            assert max(rows for op, rows in operators if "Seek" in op) <= 2 * (11 + 3), operators
            assert sum(rows for op, rows in operators if "Seek" in op) <= seeks * (11 + 3)
            assert [op for op, _ in operators].count("Top") == 1, operators
            assert "Sort" not in {op for op, _ in operators}, operators
    finally:
        await cypher(client, mine + "DETACH DELETE e", t=tenant)


@pytest.mark.parametrize(("name", "value"), [
    ("outcome", "maybe"), ("operation", "token:fly"), ("application_id", "nope"),
    ("start_date", "yesterday"), ("token_id", "a"), ("start", "bm90LWEtY3Vyc29y"),
    # A hand-made cursor whose time has no offset (the service's always carry one).
    ("start", "WyIyMDI0LTAxLTAxVDAwOjAwOjAwIiwgIjZmMWMxYTUyLTZlMGUtNGEzOS05YTU2"
              "LTBkM2Q4ZjBjMmIxMSJd")])
async def test_bad_log_filters_are_400_naming_the_field(client, auditor, name, value):
    resp = await client.get("/logs", params={name: value}, headers=auditor)
    body = await resp.json()
    assert resp.status == 400 and name in body["errors"], body


@pytest.mark.parametrize(("params", "name", "message"), [
    ([("operations", "token:read")], "operations", "is not a query parameter of this route"),
    ([("outcome", "success"), ("outcome", "denied")], "outcome", "must be given once")])
async def test_an_undeclared_or_repeated_log_filter_is_a_400_naming_it(client, auditor, params,
                                                                       name, message):
    resp = await client.get("/logs", params=params, headers=auditor)
    body = await resp.json()
    assert resp.status == 400, body
    assert body["errors"] == {name: [message]}


@pytest.mark.parametrize(("name", "value", "message"), [
    # ISO 8601 times whose offset puts them in year 0 or 10000 in UTC (the driver, converting
    # them to UTC, failed: a 500).
    ("start_date", "0001-01-01T00:00:00+05:00",
     "must be an ISO 8601 date-time from year 1 to 9999"),
    ("end_date", "9999-12-31T23:59:59-05:00",
     "must be an ISO 8601 date-time from year 1 to 9999"),
    ("start", encode_cursor(["0001-01-01T00:00:00+05:00", "00000000-0000-0000-0000-000000000000"]),
     "is not a cursor this service issued"),
    ("start", encode_cursor(["9999-12-31T23:59:59-05:00", "00000000-0000-0000-0000-000000000000"]),
     "is not a cursor this service issued")])
async def test_log_times_utc_cannot_hold_are_400_naming_the_field(client, auditor, name, value,
                                                                  message):
    resp = await client.get("/logs", params={name: value}, headers=auditor)
    body = await resp.json()
    assert resp.status == 400, body
    assert resp.content_type == "application/problem+json"
    assert body["errors"] == {name: [message]}


async def test_log_times_at_the_calendar_ends_within_utc_are_taken(client, auditor):
    resp = await client.get("/logs", params={"start_date": "0001-01-01T00:00:00-05:00",
                                             "end_date": "9999-12-31T23:59:59+05:00"},
                            headers=auditor)
    assert resp.status == 200, await resp.text()


@pytest.mark.parametrize("statement", ["audit/list", "audit/list_by_application",
                                       "audit/list_by_operation", "audit/list_by_outcome",
                                       "audit/list_by_token", "audit/chain_events",
                                       "audit/export", "audit/prune_prefix",
                                       "audit/prune_leftovers"])
async def test_every_log_statement_is_index_backed(client, statement):
    db = database(client.server.app)
    params = {**query_ids(tenant_id="t", token_id="x", application_id="a"), "operation": "o",
              "outcome": "success", "outcomes": list(OUTCOMES), "since": None, "until": None,
              "before_at": None,
              "before_id": "", "limit": 10, "chain": "c", "after": 0, "after_at": None,
              "after_id": "", "cutoff": None, "batch": 10, "chains": chain_forms(new_chain_id())}
    from datetime import UTC, datetime
    now = datetime.now(UTC)
    params.update(times=time_forms(since=now - timedelta(days=1), until=now, before=now,
                                   after=now, cutoff=now))
    _, summary, _ = await db.driver.execute_query(
        "EXPLAIN " + db.catalog.text(statement), params, database_=db.database)
    operators = set()

    def walk(plan):
        operators.add(plan["operatorType"].split("@")[0])
        for child in plan.get("children", []):
            walk(child)
    walk(summary.plan)
    assert not operators & {"NodeByLabelScan", "AllNodesScan", "DirectedAllRelationshipsScan",
                            "UndirectedAllRelationshipsScan", "RelationshipTypeScan"}, operators
    assert any("Seek" in op or "IndexScan" in op for op in operators), operators


# --- the service's own work and hostile input -------------------------------------------------

async def test_the_expiry_sweeper_records_each_deletion_as_the_system(client, admin_headers,
                                                                     tenant, auditor):
    card = await create_card(client, admin_headers)
    await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                         "SET t.expires_at = datetime() - duration('PT1S')",
                 t=tenant.tenant_id, id=card["id"])
    services = client.server.app[services_key]
    assert await services.expiry.sweep() >= 1
    await settle(client)
    events = await logs(client, auditor, application_id="system")
    assert [(e["operation"], e["token_ids"], e["outcome"], e["reason"], e["key_id"])
            for e in events] == [("token:delete", [card["id"]], "success", "expired", None)]
    # Committed with the deletion, then linked into this process's chain like any other event.
    assert await cypher(client, "MATCH (e:PendingAuditEvent) WHERE e.tenant_id = $t OR "
                        "(e.tenant_key = $tk AND e.tenant_rest = $tr) RETURN e.id",
                        t=tenant.tenant_id, **of_tenant(tenant.tenant_id)) == []
    assert events[0]["id"] in {e["id"] for e in await chain_events(client)}
    assert await verify_own_chain(client) == []


async def test_hostile_headers_and_unparsable_bodies_still_leave_a_bounded_event(
        client, admin_headers, tenant, auditor):
    hostile_agent = "agent\t\u202e" + "A" * 6_000  # under the parser's 8 kB line limit
    headers = {**admin_headers, "User-Agent": hostile_agent,
               "traceparent": "00-" + "z" * 1_000 + "-01", "Content-Type": "application/json"}
    resp = await client.post("/tokens", data=b'{"type": "card", "data": ', headers=headers)
    assert resp.status == 400
    trace_id = resp.headers["SVC-TRACE-ID"]
    [event] = [e for e in await logs(client, auditor, outcome="invalid")
               if e["trace_id"] == trace_id]
    assert (event["route"], event["status"]) == ("POST /tokens", 400)
    assert event["user_agent"].startswith("agent??AAA") and len(event["user_agent"]) == 256
    assert "zzz" not in event["trace_id"] and len(event["trace_id"]) <= 64


async def test_a_path_id_too_long_for_a_token_fails_no_one_elses_request(
        client, admin_headers, auditor):
    """Ids in the path go into the event (and its AUDIT_REF index entries) whatever the
    outcome; one longer than any token id may be must not fail the group commit that carries
    other requests' events (a range index refuses keys of about 8 kB)."""
    card = await create_card(client, admin_headers)
    long_id = "a" * 8_150  # the request line stays under the parser's 8,190 bytes
    answers = await asyncio.gather(
        client.get(f"/tokens/{long_id}", headers=admin_headers),
        *(client.get(f"/tokens/{card['id']}", headers=admin_headers) for _ in range(8)))
    assert answers[0].status == 404, answers[0].status
    assert [r.status for r in answers[1:]] == [200] * 8
    [event] = [e for e in await logs(client, auditor, outcome="not_found")
               if e["trace_id"] == answers[0].headers["SVC-TRACE-ID"]]
    assert event["token_ids"] == [] and event["status"] == 404
    # A write's event is stored by the write's own statement: the same id there is no 503 either.
    resp = await client.patch(f"/tokens/{long_id}", data=b'{"metadata": {"a": "b"}}',
                              headers={**admin_headers,
                                       "Content-Type": "application/merge-patch+json"})
    assert resp.status == 404, resp.status
