"""Gets read together (repository/coalesce.py `ReadTogether`): gets that wait while a get's read
holds the lane go into one statement (tokens/get_batch), each with its own answer and its own
audit event; a row that finds nothing it may see (no such token, another tenant's) is that
request's 404 alone; rows of other readable prefixes go in a statement of their own; a get near
its deadline is sent alone, and one that waits past it is a 503; a batch Neo4j refuses sends
each row again alone; one the database cannot answer is every row's 503."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest
from factories import database, new_tenant
from neo4j.exceptions import ClientError
from support import lanes

from vaultgraph.api.typedefs import services_key
from vaultgraph.errors import Unavailable

CARDS = ["4111111111111111", "5500005555555559", "340000000000009", "6011000000000004",
         "3530111333300000"]


@pytest.fixture
def settings(settings):
    """One lane: the test holds it, and what waits meanwhile goes in one batch."""
    return dataclasses.replace(settings, get_lanes=1, get_batch_max=16)


def repo(client):
    return client.server.app[services_key].tokens.repo


def together(client):
    return repo(client)._gets


def batches() -> tuple[float, float]:
    """Statements of gets read together so far, and the gets they held."""
    return lanes.batches("vaultgraph_gets_read_together")


def lane_held(client, count: int):
    return lanes.lane_held(together(client), count)


async def create(client, headers, number: str) -> str:
    answer = await client.post("/tokens", json={"type": "card", "data": {"number": number}},
                               headers=headers)
    assert answer.status == 201
    return (await answer.json())["id"]


def get(client, headers, token_id: str):
    return asyncio.create_task(client.get(f"/tokens/{token_id}", headers=headers))


async def test_gets_that_wait_are_read_together_each_with_its_answer_and_event(
        client, admin_headers):
    other = await new_tenant(client.server.app, "other")
    theirs = await create(client, {"SVC-API-KEY": other.key}, CARDS[0])
    ours = [await create(client, admin_headers, number) for number in CARDS]
    missing = str(uuid.uuid4())
    asked = [*ours, missing, theirs]
    before = batches()
    async with lane_held(client, len(asked)):
        sent = [get(client, admin_headers, token_id) for token_id in asked]
    answers = [await task for task in sent]
    # One statement held all seven.
    assert batches() == (before[0] + 1, before[1] + len(asked))
    assert [a.status for a in answers] == [200] * len(CARDS) + [404, 404]
    for answer, token_id, number in zip(answers, ours, CARDS, strict=False):
        body = await answer.json()
        assert (body["id"], body["data"]) == (token_id, {"number": number})
    # Another tenant's token is answered as one that does not exist, and neither names it.
    missing_problem, their_problem = [await a.json() for a in answers[-2:]]
    assert missing_problem.keys() == their_problem.keys()
    assert CARDS[0] not in str(their_problem)
    assert together(client)._busy == 0
    # Each request left its own event, naming its token and its answer.
    await client.server.app[services_key].audit_writer.settle()
    for token_id, status in zip(asked, [200] * len(CARDS) + [404, 404], strict=True):
        resp = await client.get("/logs", params={"token_id": token_id}, headers=admin_headers)
        reads = [e for e in (await resp.json())["data"] if e["operation"] == "token:read"]
        assert [(e["token_ids"], e["status"]) for e in reads] == [([token_id], status)]


async def test_gets_of_other_prefixes_are_read_in_a_statement_of_their_own(
        client, admin_headers, tenant):
    ids = [await create(client, admin_headers, number) for number in CARDS[:3]]
    tokens = repo(client)
    before = batches()
    async with lane_held(client, 4):
        sent = [asyncio.create_task(tokens.get(tenant_id=tenant.tenant_id, id=token_id,
                                               prefixes=prefixes))
                for token_id, prefixes in ((ids[0], ["/"]), (ids[1], ["/elsewhere/"]),
                                           (ids[2], ["/"]), (ids[0], ["/elsewhere/"]))]
    found = [await task for task in sent]
    # The tokens lie under "/": read under "/elsewhere/" they are not there.
    assert [None if t is None else t.id for t in found] == [ids[0], None, ids[2], None]
    assert batches() == (before[0] + 2, before[1] + 4)
    assert together(client)._busy == 0


async def test_gets_sent_at_once_are_each_answered_with_their_own_token(client, admin_headers):
    ids = [await create(client, admin_headers, number) for number in CARDS]
    asked = [ids[i % len(ids)] for i in range(60)]
    answers = await asyncio.gather(*(get(client, admin_headers, token_id)
                                     for token_id in asked))
    assert [a.status for a in answers] == [200] * 60
    bodies = [await a.json() for a in answers]
    assert [(b["id"], b["data"]["number"]) for b in bodies] == [
        (token_id, CARDS[ids.index(token_id)]) for token_id in asked]


async def test_a_get_near_its_deadline_is_sent_alone(client, admin_headers, monkeypatch):
    from vaultgraph.repository import coalesce

    ids = [await create(client, admin_headers, number) for number in CARDS[:3]]
    monkeypatch.setattr(coalesce, "ALONE_BELOW", 3600.0)  # every request is near its end
    before = batches()
    async with lane_held(client, 3):
        sent = [get(client, admin_headers, token_id) for token_id in ids]
    answers = [await task for task in sent]
    assert [a.status for a in answers] == [200] * 3
    assert batches() == before
    assert together(client)._busy == 0


@pytest.fixture
def short_deadline(settings):
    return dataclasses.replace(settings, request_timeout=2.0)


async def test_a_get_that_waits_past_its_deadline_is_a_503(aiohttp_client, short_deadline):
    from vaultgraph.app import create_app

    client = await aiohttp_client(create_app(short_deadline, schema_applied=True))
    headers = {"SVC-API-KEY": (await new_tenant(client.server.app, "deadline")).key}
    token_id = await create(client, headers, CARDS[0])
    gets = together(client)
    gets._busy = 1
    try:
        answer = await client.get(f"/tokens/{token_id}", headers=headers)
        assert answer.status == 503
        assert answer.headers["Retry-After"] == "1"
    finally:
        gets._next()
    assert gets._busy == 0 and not gets._waiting
    assert (await client.get(f"/tokens/{token_id}", headers=headers)).status == 200


async def test_a_batch_refused_sends_each_row_alone(client, admin_headers, monkeypatch):
    ids = [await create(client, admin_headers, number) for number in CARDS[:3]]
    db = database(client.server.app)
    sent_rows = []

    async def refused(name, params, until):
        sent_rows.append(len(params["rows"]))
        raise ClientError("refused")

    monkeypatch.setattr(db, "read_rows", refused)
    async with lane_held(client, 3):
        sent = [get(client, admin_headers, token_id) for token_id in ids]
    answers = [await task for task in sent]
    assert sent_rows == [3]
    assert [a.status for a in answers] == [200] * 3
    assert [(await a.json())["id"] for a in answers] == ids


async def test_a_batch_the_database_cannot_answer_is_every_row_s_503(
        client, admin_headers, monkeypatch):
    ids = [await create(client, admin_headers, number) for number in CARDS[:2]]
    db = database(client.server.app)

    async def unavailable(name, params, until):
        raise Unavailable()

    monkeypatch.setattr(db, "read_rows", unavailable)
    async with lane_held(client, 2):
        sent = [get(client, admin_headers, token_id) for token_id in ids]
    answers = [await task for task in sent]
    assert [a.status for a in answers] == [503, 503]
    assert together(client)._busy == 0


async def test_a_get_with_nothing_in_flight_is_sent_alone(client, admin_headers):
    token_id = await create(client, admin_headers, CARDS[0])
    before = batches()
    assert (await client.get(f"/tokens/{token_id}", headers=admin_headers)).status == 200
    assert batches() == before
    assert together(client)._busy == 0


async def test_gets_are_never_read_together_when_the_batch_is_one(aiohttp_client, settings):
    from vaultgraph.app import create_app

    client = await aiohttp_client(create_app(
        dataclasses.replace(settings, get_batch_max=1), schema_applied=True))
    assert together(client) is None
    headers = {"SVC-API-KEY": (await new_tenant(client.server.app, "alone")).key}
    ids = [await create(client, headers, number) for number in CARDS]
    before = batches()
    answers = await asyncio.gather(*(get(client, headers, token_id) for token_id in ids))
    assert [a.status for a in answers] == [200] * len(CARDS)
    assert batches() == before
