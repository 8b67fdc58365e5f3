"""Issue #36.6 (ready is not ready): before `/ready` turns 200, start-up has Neo4j plan every
statement in the form the requests send it (its text, the audit prefix included where a write
carries it, and its parameters' types: Neo4j caches a plan under both), so the first requests
after a (re)start do not pay for planning; until then `/ready` is 503."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import orjson
from support.statements import recording

from vaultgraph.api.typedefs import services_key
from vaultgraph.repository.audit_prefix import audited_text
from vaultgraph.repository.warmup import (
    FORGET,
    NOT_HERE,
    REHEARSAL_TENANT,
    RehearsalFailed,
    parameters,
)
from vaultgraph.services import startup as startup_module

from .conftest import wait_ready

CARD = {"type": "card", "data": {"number": "4242424242424242"}}
EXPLAIN = "EXPLAIN "


async def _use_cases(http: aiohttp.ClientSession, key: str) -> None:
    """What a client does first: create, read, tokenize, list, change, link, delete, read
    the trail."""
    headers = {"SVC-API-KEY": key}

    async def call(method: str, path: str, status: int, *, json=None,
                   content_type: str | None = None) -> dict | None:
        sent = {**headers, **({"Content-Type": content_type} if content_type else {})}
        body = {"data": orjson.dumps(json)} if json is not None else {}
        async with http.request(method, path, headers=sent, **body) as resp:
            assert resp.status == status, (method, path, await resp.text())
            return await resp.json() if resp.status != 204 else None

    parent = await call("POST", "/tokens", 201, json=CARD, content_type="application/json")
    child = await call("POST", "/tokens", 201, json={"type": "token", "data": "x"},
                       content_type="application/json")
    await call("GET", f"/tokens/{parent['id']}", 200)
    await call("POST", "/tokenize", 200, json=[CARD, {"type": "token", "data": "y"}],
               content_type="application/json")
    await call("GET", "/tokens", 200)
    await call("PATCH", f"/tokens/{child['id']}", 200, json={"metadata": {"k": "v"}},
               content_type="application/merge-patch+json")
    await call("POST", f"/tokens/{parent['id']}/children/{child['id']}", 201)
    await call("GET", f"/tokens/{parent['id']}/children", 200)
    await call("DELETE", f"/tokens/{parent['id']}/children/{child['id']}", 204)
    await call("DELETE", f"/tokens/{child['id']}", 204)
    await call("GET", "/applications", 200)
    await call("GET", "/logs", 200)


async def test_every_statement_the_first_requests_send_was_planned_before_ready(
        serve, tenant):
    with recording() as sent:
        served = await serve()
        await wait_ready(served)
        ready = sent.mark()
        async with aiohttp.ClientSession(f"http://127.0.0.1:{served.port}") as http:
            await _use_cases(http, tenant.key)
        services = served.app[services_key]
        await services.audit_writer.settle()
        after = [(s.text, s.types) for s in sent.since(ready)
                 if not s.text.startswith(EXPLAIN)]

    db = services.database
    prepared = services.startup.prepared
    catalog = {db.catalog.text(n) for n in db.catalog.names()}
    explained = {(s.text.removeprefix(EXPLAIN), s.types) for s in sent.since(0)[:ready]
                 if s.text.startswith(EXPLAIN)}
    planned = prepared.forms
    assert planned <= explained  # sent before /ready turned 200
    # Every catalog statement outside the schema and search was planned (search is planned once
    # ready), and writes with the audit prefix too; nothing was refused as not a statement.
    planned_texts = {text for text, _ in planned}
    assert [n for n in db.catalog.names() if db.catalog.text(n) not in planned_texts] == [
        n for n in db.catalog.names() if n.startswith(NOT_HERE)]
    assert prepared.skipped == []
    assert any(t.startswith("CALL () { CREATE (audit_event") for t in planned_texts)
    # What the requests sent is a form the warm-up planned: its text and the types of the
    # parameters it uses (a call may pass more, which the statement ignores).
    sent_by_requests = [(text, _used(text, types)) for text, types in after
                        if text in catalog or text.startswith("CALL () { CREATE (audit_event")]
    assert len(sent_by_requests) >= 10
    missing = [(text, types) for text, types in sent_by_requests if (text, types) not in planned]
    diffs = [_differences(text, types, planned) for text, types in missing]
    assert diffs == []


def _differences(text, types, planned) -> tuple[str, list]:
    """A form the warm-up missed, as the parameters it sent otherwise than the nearest planned
    form of the same text."""
    forms = [dict(t) for planned_text, t in planned if planned_text == text]
    sent = dict(types)
    nearest = min(forms, key=lambda f: sum(f.get(k) != v for k, v in sent.items()),
                  default={})
    return text.splitlines()[0][:60], sorted(
        (k, v, nearest.get(k)) for k, v in sent.items() if nearest.get(k) != v)


def _used(text: str, types: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    names = set(parameters(text))
    return tuple((name, kind) for name, kind in types if name in names)


async def test_ready_is_503_until_the_statements_are_planned(serve, monkeypatch):
    entered, release = asyncio.Event(), asyncio.Event()
    real = startup_module.prepare

    async def held(*args, **kwargs):
        entered.set()
        await release.wait()
        return await real(*args, **kwargs)

    monkeypatch.setattr(startup_module, "prepare", held)
    served = await serve()
    async with asyncio.timeout(60):
        await entered.wait()  # schema applied, key ring checked, pool opened: planning next
    async with aiohttp.ClientSession(f"http://127.0.0.1:{served.port}") as http:
        async with http.get("/ready") as resp:
            assert resp.status == 503
            assert (await resp.json())["detail"] == "The service is starting."
        release.set()
        await wait_ready(served)


# The write path, rehearsed before /ready turns 200: each statement an API key's look-up, a
# chain of write events opened, and a first create (its event pending, and complete at its
# place), two creates written together, read, update, link, delete and audit batch send, run
# for real in one transaction committed, and then removed.
REHEARSED = ["auth/authenticate", "audit/open_write_chain", "tokens/create", "tokens/create",
             "tokens/create_batch", "tokens/get", "tokens/get_batch", "tokens/lock_for_update",
             "tokens/update",
             "graph/link", "tokens/delete"] + ["audit/write_batch"] * 6


async def test_the_write_path_is_rehearsed_before_ready_and_leaves_nothing(serve, caplog):
    with caplog.at_level(logging.INFO, logger="vaultgraph.startup"), recording() as sent:
        served = await serve()
        await wait_ready(served)
        ready = sent.mark()
    services = served.app[services_key]
    db, prepared = services.database, services.startup.prepared
    # Each statement ran and answered as it does for a request (the read found the token the
    # create wrote, the batch was in order): the write path ran, not only its plans.
    assert prepared.rehearsed == REHEARSED
    # Each in a form the warm-up planned (its text and parameter types): the very plan a first
    # request runs, which Neo4j makes runnable on first use, not when it plans it.
    assert [name for name, form in zip(REHEARSED, prepared.rehearsed_forms, strict=True)
            if form not in prepared.forms] == []
    before_ready = [s.text for s in sent.since(0)[:ready]]
    for name in ("tokens/create", "tokens/delete", "graph/link"):
        assert audited_text(db.catalog.text(name)) in before_ready, name
    assert audited_text(db.catalog.text("tokens/create"), placed=True) in before_ready
    assert db.catalog.text("audit/write_batch") in before_ready
    [line] = [r for r in caplog.records if r.msg == "ready"]
    assert line.writes_rehearsed == len(REHEARSED)
    assert line.statements_prepared == prepared.statements
    # It was committed (the removal found its four tokens, eight events, a block and two chains)
    # and then removed: no node or relationship of its tenant, none of its tokens, audit
    # events or chains, no tenant (nor its key).
    assert db.catalog.text(FORGET) in [s.text for s in sent.since(0)[:ready]]
    assert prepared.removed == 4 + 8 + 1 + 2
    tenant = prepared.rehearsal_tenant
    assert tenant.startswith(REHEARSAL_TENANT)
    # four tokens, two chains, eight events and a block
    assert len(prepared.rehearsal_ids) == 4 + 2 + 8 + 1
    records, _, _ = await db.driver.execute_query(
        "CALL () { MATCH (n) WHERE n.tenant_id = $tenant OR n.id = $tenant "
        "  OR n.id IN $ids RETURN count(n) AS nodes } "
        "CALL () { MATCH ()-[r]->() WHERE r.tenant_id = $tenant RETURN count(r) AS links } "
        "CALL () { MATCH (e:AuditEvent) WHERE e.tenant_id = $tenant OR e.id IN $ids "
        "  RETURN count(e) AS events } "
        "CALL () { MATCH (n) WHERE n.tenant_id STARTS WITH $prefix OR n.id STARTS WITH $prefix "
        "  RETURN count(n) AS leftovers } "
        "RETURN nodes, links, events, leftovers",
        tenant=tenant, ids=prepared.rehearsal_ids, prefix=REHEARSAL_TENANT,
        database_=db.database)
    assert dict(records[0]) == {"nodes": 0, "links": 0, "events": 0, "leftovers": 0}


async def test_a_failed_rehearsal_does_not_keep_the_service_unready(serve, monkeypatch, caplog):
    async def refused(db, prepared):
        prepared.rehearsed.append("tokens/create")
        raise RehearsalFailed("tokens/get")

    monkeypatch.setattr(startup_module, "rehearse", refused)
    with caplog.at_level(logging.INFO, logger="vaultgraph.startup"):
        served = await serve()
        await wait_ready(served)
    [warning] = [r for r in caplog.records if r.msg == "write path not rehearsed"]
    assert (warning.error, warning.rehearsed) == ("RehearsalFailed", 1)
    [line] = [r for r in caplog.records if r.msg == "ready"]
    assert line.writes_rehearsed == 1


async def test_what_a_stopped_rehearsal_left_is_removed_by_the_next_start(serve):
    first = await serve()
    await wait_ready(first)
    db = first.app[services_key].database
    # As a start-up stopped between the rehearsal's commit and its removal leaves it: a token
    # (with its metadata loop), a deleted token, an event and a chain under the prefix.
    left = REHEARSAL_TENANT + "left-by-a-stopped-start"
    await db.driver.execute_query(
        "CREATE (t:Token {tenant_id: $t, id: 'a', type: 'token'})-[:HAS_META "
        "{tenant_id: $t, kv: 'k', token_id: 'a'}]->(t) "
        "CREATE (:DeletedToken {tenant_id: $t, id: 'b'}) "
        "CREATE (:AuditEvent {tenant_id: $t, id: $t, at: datetime()}) "
        "CREATE (:AuditChain {id: $t, seq: 1})",
        t=left, database_=db.database)
    served = await serve()
    await wait_ready(served)
    # Its own nine and the four left (more only if another start-up shares the database).
    assert served.app[services_key].startup.prepared.removed >= 2 + 6 + 1 + 4
    records, _, _ = await db.driver.execute_query(
        "MATCH (n) WHERE n.tenant_id = $t OR n.id = $t RETURN count(n) AS n",
        t=left, database_=db.database)
    assert records[0]["n"] == 0
