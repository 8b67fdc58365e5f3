"""Creates written together (repository/coalesce.py): creates that wait while a create's write
holds the lane go into one statement, each with its own answer and its own audit event, signed
at its own place; a create whose id is taken gets its 409 alone, and its row stores no event;
each writes its own webhook event; rows of several tenants share a statement, each its own
tenant's; a create near its deadline is sent alone, and one that waits past it is a 503 and is
never written; a batch refused without naming a row sends each row again alone; one the
database cannot answer is every row's 503."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest
from factories import blocked_behind, database, new_tenant
from neo4j.exceptions import ClientError
from support import lanes

from vaultgraph.api.typedefs import services_key
from vaultgraph.audit.chain import placed_holds
from vaultgraph.audit.ids import query_ids
from vaultgraph.errors import Unavailable, UniquenessViolation
from vaultgraph.repository.audit import event_of

CARDS = ["4111111111111111", "5500005555555559", "340000000000009", "6011000000000004",
         "3530111333300000"]


@pytest.fixture
def settings(settings):
    """One lane: the test holds it, and what waits meanwhile goes in one batch."""
    return dataclasses.replace(settings, create_lanes=1, create_batch_max=10)


def services(client):
    return client.server.app[services_key]


def together(client):
    return services(client).tokens.repo._creates


def batches() -> tuple[float, float]:
    """Statements of creates written together so far, and the creates they held."""
    return lanes.batches("vaultgraph_creates_written_together")


def lane_held(client, count: int):
    return lanes.lane_held(together(client), count)


def post(client, headers, number: str, **extra):
    return asyncio.create_task(client.post(
        "/tokens", json={"type": "card", "data": {"number": number}, **extra},
        headers=headers))


async def cypher(client, query: str, **params):
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(query, params, database_=db.database)
    return [r.data() for r in records]


async def events_of(client, token_id: str) -> list[dict]:
    parts = query_ids(token_id=token_id)
    return [event_of(r["p"]) for r in await cypher(
        client, "MATCH (e:WriteAuditEvent) WHERE e.token_key = $k AND e.token_rest = $r "
                "RETURN properties(e) AS p", k=parts["token_key"], r=parts["token_rest"])]


async def events_naming(client, token_id: str) -> list[dict]:
    """The write events that name `token_id`, first or beside another (a child create's name
    its parent too: the others by their AUDIT_REF self-loops)."""
    parts = query_ids(token_id=token_id)
    return [event_of(r["p"]) for r in await cypher(
        client, "MATCH (e:WriteAuditEvent) WHERE e.token_key = $k AND e.token_rest = $r "
                "OR EXISTS { (e)-[ref:AUDIT_REF]->(e) WHERE ref.token_key = $k "
                "AND ref.token_rest = $r } RETURN properties(e) AS p",
        k=parts["token_key"], r=parts["token_rest"])]


async def test_creates_that_wait_are_written_together_each_with_its_answer_and_event(
        client, admin_headers):
    before = batches()
    async with lane_held(client, len(CARDS)):
        sent = [post(client, admin_headers, number, metadata={"n": str(i)})
                for i, number in enumerate(CARDS)]
    answers = [await task for task in sent]
    assert [a.status for a in answers] == [201] * len(CARDS)
    cards = [await a.json() for a in answers]
    # One statement held all five.
    assert batches() == (before[0] + 1, before[1] + len(CARDS))
    keyring = services(client).keyring
    places = set()
    for i, (card, number) in enumerate(zip(cards, CARDS, strict=True)):
        assert card["data"] == {"number": number} and card["metadata"] == {"n": str(i)}
        shown = await client.get(f"/tokens/{card['id']}", headers=admin_headers)
        assert (await shown.json())["data"] == {"number": number}
        # Its own event, stored once by the batch, complete and signed at its own place.
        [event] = await events_of(client, card["id"])
        assert (event["kind"], event["status"], event["operation"]) == (
            "write", 201, "token:create")
        assert event["token_ids"] == [card["id"]] and placed_holds(keyring, event)
        places.add((event["chain"], event["seq"]))
    assert len(places) == len(CARDS)
    await services(client).audit_writer.settle()
    chains = {chain for chain, _ in places} | {services(client).audit_writer.chain}
    assert [f.describe() for f in await services(client).audit_log.verify(chains=chains)] == []


async def test_creates_sent_at_once_are_each_stored_once_with_their_own_events(
        client, admin_headers, tenant):
    """Sixty creates at once through one lane: some written together, every one answered and
    stored once, each with its one event at a place of its own, and the chains verify."""
    before = batches()
    numbers = [CARDS[i % len(CARDS)] for i in range(60)]
    answers = await asyncio.gather(*(post(client, admin_headers, number, metadata={"i": str(i)})
                                     for i, number in enumerate(numbers)))
    assert [a.status for a in answers] == [201] * 60
    cards = [await a.json() for a in answers]
    assert batches()[0] > before[0]
    assert [(c["data"]["number"], c["metadata"]["i"]) for c in cards] == [
        (number, str(i)) for i, number in enumerate(numbers)]
    [stored] = await cypher(client, "MATCH (t:Token {tenant_id: $t}) RETURN count(t) AS n",
                            t=tenant.tenant_id)
    assert stored["n"] == 60
    places = set()
    for card in cards:
        [event] = await events_of(client, card["id"])
        assert event["status"] == 201
        places.add((event["chain"], event["seq"]))
    assert len(places) == 60
    await services(client).audit_writer.settle()
    chains = {chain for chain, _ in places} | {services(client).audit_writer.chain}
    assert [f.describe() for f in await services(client).audit_log.verify(chains=chains)] == []


async def waiting(client, count: int) -> None:
    await lanes.waiting(together(client), count)


async def test_an_id_taken_in_a_batch_is_a_409_for_its_request_alone(client, admin_headers):
    taken = str(uuid.uuid4())
    async with lane_held(client, 3):
        first = post(client, admin_headers, CARDS[0], id=taken)
        await waiting(client, 1)  # first in the batch
        second = post(client, admin_headers, CARDS[1], id=taken)
        other = post(client, admin_headers, CARDS[2])
    first, second, other = await first, await second, await other
    assert (first.status, second.status, other.status) == (201, 409, 201)
    problem = await second.json()
    assert problem["status"] == 409 and CARDS[1] not in str(problem)
    shown = await client.get(f"/tokens/{taken}", headers=admin_headers)
    assert (await shown.json())["data"] == {"number": CARDS[0]}
    # The taken row stored no event; its 409 waited for its own, written at its place.
    assert sorted(e["status"] for e in await events_of(client, taken)) == [201, 409]
    assert together(client)._busy == 0


async def test_each_create_written_together_writes_its_webhook_event(client, admin_headers):
    resp = await client.post("/webhooks", json={"url": "https://hooks.example.com/in",
                                                "events": ["token.created"]},
                             headers=admin_headers)
    assert resp.status == 201
    hook = await resp.json()
    before = batches()
    async with lane_held(client, 3):
        sent = [post(client, admin_headers, number) for number in CARDS[:3]]
    ids = [(await (await task).json())["id"] for task in sent]
    assert batches()[0] == before[0] + 1
    deliveries = await cypher(
        client, "MATCH (d:WebhookDelivery {webhook_id: $w}) RETURN d.token_id AS token, "
                "d.type AS type, d.state AS state", w=hook["id"])
    assert sorted((d["token"], d["type"], d["state"]) for d in deliveries) == sorted(
        (token_id, "token.created", "pending") for token_id in ids)


async def test_tenants_share_a_batch_each_row_with_its_own_tenant(client, admin_headers,
                                                                 tenant):
    other = await new_tenant(client.server.app, "other")
    other_headers = {"SVC-API-KEY": other.key}
    before = batches()
    async with lane_held(client, 4):
        sent = [post(client, headers, number) for headers, number in
                zip([admin_headers, other_headers] * 2, CARDS, strict=False)]
    answers = [await task for task in sent]
    assert [a.status for a in answers] == [201] * 4
    assert batches() == (before[0] + 1, before[1] + 4)
    for i, answer in enumerate(answers):
        card = await answer.json()
        own, theirs = (admin_headers, other_headers)[::1 if i % 2 == 0 else -1]
        assert (await client.get(f"/tokens/{card['id']}", headers=own)).status == 200
        assert (await client.get(f"/tokens/{card['id']}", headers=theirs)).status == 404
        [event] = await events_of(client, card["id"])
        assert event["tenant_id"] == (tenant if i % 2 == 0 else other).tenant_id


def post_child(client, headers, parent_id: str, number: str, **extra):
    return asyncio.create_task(client.post(
        f"/tokens/{parent_id}/children",
        json={"type": "card", "data": {"number": number}, **extra}, headers=headers))


async def created(client, headers, number: str) -> str:
    answer = await client.post("/tokens", json={"type": "card", "data": {"number": number}},
                               headers=headers)
    assert answer.status == 201
    return (await answer.json())["id"]


@pytest.fixture
def rows_written(client, monkeypatch):
    """The records each batch statement returned (a batch that failed and went alone has
    none): proof the rows were written together, not one by one after a refusal. Beside each
    count, the events stored at the places of the batch's orphan rows, read as soon as the
    statement has committed, before any request has ended."""
    db = database(client.server.app)
    write_rows, written = db.write_rows, []

    async def counted(name, params, until):
        records = await write_rows(name, params, until)
        written.append(len(records))
        orphans = [params["rows"][r["index"]] for r in records if r["orphan"]]
        stored = await cypher(
            client, "UNWIND $places AS place MATCH (e:AuditEvent {chain: place[0], "
                    "seq: place[1]}) RETURN count(e) AS n",
            places=[[row["audit_chain"], row["audit_seq"]] for row in orphans])
        written.append(("stored at the orphans' places", stored[0]["n"] if stored else 0))
        return records

    monkeypatch.setattr(db, "write_rows", counted)
    return written


async def test_children_that_wait_are_written_together_each_under_its_parent(
        client, admin_headers, rows_written):
    resp = await client.post("/webhooks", json={"url": "https://hooks.example.com/in",
                                                "events": ["token.created"]},
                             headers=admin_headers)
    hook = await resp.json()
    parents = [await created(client, admin_headers, number) for number in CARDS[:2]]
    under = [parents[0], parents[1], parents[0]]
    before = batches()
    async with lane_held(client, len(under)):
        sent = [post_child(client, admin_headers, parent, number, metadata={"n": str(i)})
                for i, (parent, number) in enumerate(zip(under, CARDS[2:], strict=True))]
    answers = [await task for task in sent]
    assert [a.status for a in answers] == [201] * len(under)
    children = [(await a.json())["id"] for a in answers]
    assert batches() == (before[0] + 1, before[1] + len(under))
    assert rows_written == [len(under), ("stored at the orphans' places", 0)]
    for parent in parents:
        page = await (await client.get(f"/tokens/{parent}/children",
                                       headers=admin_headers)).json()
        assert sorted(c["id"] for c in page["data"]) == sorted(
            child for child, p in zip(children, under, strict=True) if p == parent)
    keyring, chains = services(client).keyring, {services(client).audit_writer.chain}
    for child, parent, number in zip(children, under, CARDS[2:], strict=True):
        shown = await client.get(f"/tokens/{child}", headers=admin_headers)
        assert (await shown.json())["data"] == {"number": number}
        # Its event names the child and its parent, stored by the batch at its own place.
        [event] = await events_naming(client, child)
        assert (event["status"], event["operation"]) == (201, "token:create,token:read")
        assert sorted(event["token_ids"]) == sorted([child, parent])
        assert placed_holds(keyring, event)
        chains.add(event["chain"])
    deliveries = await cypher(
        client, "MATCH (d:WebhookDelivery {webhook_id: $w, type: 'token.created'}) "
                "WHERE d.token_id IN $ids RETURN d.token_id AS token, d.parent_id AS parent",
        w=hook["id"], ids=children)
    assert sorted((d["token"], d["parent"]) for d in deliveries) == sorted(
        zip(children, under, strict=True))
    await services(client).audit_writer.settle()
    assert [f.describe() for f in await services(client).audit_log.verify(chains=chains)] == []


async def test_a_child_whose_parent_is_not_found_in_a_batch_is_a_404_for_its_request_alone(
        client, admin_headers, rows_written):
    parent = await created(client, admin_headers, CARDS[0])
    other = await new_tenant(client.server.app, "other")
    theirs = await created(client, {"SVC-API-KEY": other.key}, CARDS[1])
    ids = [str(uuid.uuid4()) for _ in range(3)]
    async with lane_held(client, 3):
        sent = [post_child(client, admin_headers, under, number, id=child_id)
                for under, number, child_id in zip(
                    [parent, str(uuid.uuid4()), theirs], CARDS[2:], ids, strict=True)]
    answers = [await task for task in sent]
    assert [a.status for a in answers] == [201, 404, 404]
    # The two rows without a parent stored no event in the batch.
    assert rows_written == [3, ("stored at the orphans' places", 0)]
    problems = [await a.json() for a in answers[1:]]
    assert problems[0]["detail"] == problems[1]["detail"]  # another tenant's: as if none
    for child_id, status in zip(ids, [201, 404, 404], strict=True):
        assert (await client.get(f"/tokens/{child_id}", headers=admin_headers)).status == (
            200 if status == 201 else 404)
    await services(client).audit_writer.settle()
    # Each 404 waited for its own event, written at its place as its request ended.
    for child_id, status in zip(ids, [201, 404, 404], strict=True):
        assert [e["status"] for e in await events_naming(client, child_id)] == [status]
    assert together(client)._busy == 0


async def test_a_parent_deleted_while_its_batch_waits_for_its_lock_gets_no_child(
        client, admin_headers, tenant):
    parent = await created(client, admin_headers, CARDS[0])
    child_id = str(uuid.uuid4())

    async def in_a_batch():
        async with lane_held(client, 1):
            task = post_child(client, admin_headers, parent, CARDS[1], id=child_id)
        return await task

    answer = await blocked_behind(
        client.server.app,
        [("MATCH (p:Token {tenant_id: $t, id: $id}) REMOVE p:Token SET p:DeletedToken",
          {"t": tenant.tenant_id, "id": parent})],
        in_a_batch(), statement="tokens/create_batch")
    assert answer.status == 404
    assert (await client.get(f"/tokens/{child_id}", headers=admin_headers)).status == 404
    [linked] = await cypher(client, "MATCH (:DeletedToken {id: $id})-[r]->() "
                                    "RETURN count(r) AS n", id=parent)
    assert linked["n"] == 0


async def test_plain_creates_and_children_waiting_together_go_in_statements_of_their_own(
        client, admin_headers, rows_written):
    parent = await created(client, admin_headers, CARDS[0])
    before = batches()
    async with lane_held(client, 4):
        sent = [post(client, admin_headers, CARDS[1]),
                post_child(client, admin_headers, parent, CARDS[2]),
                post(client, admin_headers, CARDS[3]),
                post_child(client, admin_headers, parent, CARDS[4])]
    answers = [await task for task in sent]
    assert [a.status for a in answers] == [201] * 4
    # The children's parent check takes the caller's readable prefixes, which the plain
    # creates' statement does not carry: two statements, of two rows each.
    assert batches() == (before[0] + 2, before[1] + 4)
    assert [n for n in rows_written if isinstance(n, int)] == [2, 2]


async def test_a_create_near_its_deadline_is_sent_alone(client, admin_headers, monkeypatch):
    from vaultgraph.repository import coalesce

    monkeypatch.setattr(coalesce, "ALONE_BELOW", 3600.0)  # every request is near its end
    before = batches()
    async with lane_held(client, 3):
        sent = [post(client, admin_headers, number) for number in CARDS[:3]]
    answers = [await task for task in sent]
    assert [a.status for a in answers] == [201] * 3
    assert batches() == before
    assert together(client)._busy == 0


@pytest.fixture
def short_deadline(settings):
    return dataclasses.replace(settings, request_timeout=2.0)


async def test_a_create_that_waits_past_its_deadline_is_a_503_and_never_written(
        aiohttp_client, short_deadline):
    from factories import new_tenant as make_tenant

    from vaultgraph.app import create_app

    client = await aiohttp_client(create_app(short_deadline, schema_applied=True))
    tenant = await make_tenant(client.server.app, "deadline")
    headers = {"SVC-API-KEY": tenant.key}
    late = str(uuid.uuid4())
    creates = together(client)
    creates._busy = 1
    try:
        answer = await client.post("/tokens", json={"type": "card", "id": late,
                                                    "data": {"number": CARDS[0]}},
                                   headers=headers)
        assert answer.status == 503
        assert answer.headers["Retry-After"] == "1"
    finally:
        creates._next()
    assert creates._busy == 0 and not creates._waiting
    assert (await client.get(f"/tokens/{late}", headers=headers)).status == 404
    await services(client).audit_writer.settle()
    # Its request's event tells the 503, at the place the create was given.
    [event] = await events_of(client, late)
    assert (event["status"], event["outcome"], event["kind"]) == (503, "unavailable", "write")


@pytest.mark.parametrize(("failure", "tries"), [
    (UniquenessViolation, 2),
    (lambda: ClientError("refused"), 1),
])
async def test_a_batch_refused_without_naming_a_row_sends_each_row_alone(
        client, admin_headers, monkeypatch, failure, tries):
    """The uniqueness constraint twice (raced by another create for one of its ids), or Neo4j
    refusing the statement: rolled back, so each create is sent again alone."""
    db = database(client.server.app)
    sent_rows = []

    async def refused(name, params, until):
        sent_rows.append(len(params["rows"]))
        raise failure()

    monkeypatch.setattr(db, "write_rows", refused)
    async with lane_held(client, 3):
        sent = [post(client, admin_headers, number) for number in CARDS[:3]]
    answers = [await task for task in sent]
    assert sent_rows == [3] * tries
    assert [a.status for a in answers] == [201] * 3
    for answer in answers:
        card = await answer.json()
        [event] = await events_of(client, card["id"])
        assert event["status"] == 201


async def test_a_batch_the_database_cannot_answer_is_every_row_s_503(
        client, admin_headers, monkeypatch):
    db = database(client.server.app)

    async def unavailable(name, params, until):
        raise Unavailable()

    monkeypatch.setattr(db, "write_rows", unavailable)
    async with lane_held(client, 2):
        sent = [post(client, admin_headers, number) for number in CARDS[:2]]
    answers = [await task for task in sent]
    assert [a.status for a in answers] == [503, 503]
    assert together(client)._busy == 0


async def test_a_create_with_nothing_in_flight_is_sent_alone(client, admin_headers):
    before = batches()
    answer = await client.post("/tokens", json={"type": "card", "data": {"number": CARDS[0]}},
                               headers=admin_headers)
    assert answer.status == 201
    assert batches() == before
    assert together(client)._busy == 0


async def test_creates_are_never_written_together_when_the_batch_is_one(
        aiohttp_client, settings):
    from vaultgraph.app import create_app

    client = await aiohttp_client(create_app(
        dataclasses.replace(settings, create_batch_max=1), schema_applied=True))
    assert together(client) is None
    headers = {"SVC-API-KEY": (await new_tenant(client.server.app, "alone")).key}
    before = batches()
    answers = await asyncio.gather(*(post(client, headers, number) for number in CARDS))
    assert [a.status for a in answers] == [201] * len(CARDS)
    assert batches() == before
