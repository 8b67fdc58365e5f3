"""A create's audit event, stored once (docs/audit.md, "Write events"): complete, by the
create's own statement, signed at its place in the writer's chain of write events, and settled
by a block in a lane's chain that pins its MAC; written again at its place when the request
ends otherwise. Verification, pruning and export over both."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import aiohttp
import orjson
import pytest
from factories import blocked_behind, database, held_delete

from vaultgraph.api.typedefs import services_key
from vaultgraph.audit import context as audit_context
from vaultgraph.audit.chain import placed_holds
from vaultgraph.audit.ids import chain_forms, query_ids, route_number
from vaultgraph.errors import Unavailable
from vaultgraph.repository.audit import event_of
from vaultgraph.services.audit_writer import new_chain_id

CANARY = "4111111111111111"
ROUTE_NUMBER = route_number("POST /tokens/{parent_id}/children")


@pytest.fixture
def write_chains() -> int:
    """Chains of write events a test's writer opens (a test parametrizes this, never `settings`:
    an indirect parameter of `settings` would reach the session's own fixture and set up the
    run's database again)."""
    return 1


@pytest.fixture
def settle_wait(settings) -> float:
    """How long the test's writer holds places back before a block settles them (a test
    parametrizes this, as `write_chains`)."""
    return settings.audit_settle_wait


@pytest.fixture
def settings(settings, write_chains, settle_wait):
    """One audit lane: the blocks are in "the" lane's chain."""
    return dataclasses.replace(settings, audit_lanes=1, audit_write_chains=write_chains,
                               audit_settle_wait=settle_wait)


async def cypher(client, query: str, **params):
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(query, params, database_=db.database)
    return [r.data() for r in records]


def services(client):
    return client.server.app[services_key]


async def settle(client) -> None:
    await services(client).audit_writer.settle()


async def create(client, headers, **extra):
    return await client.post("/tokens", json={"type": "card", "data": {"number": CANARY},
                                              **extra}, headers=headers)


async def stored_event(client, token_id: str) -> dict:
    """The write event naming `token_id`, as stored (properties and labels)."""
    parts = query_ids(token_id=token_id)
    [row] = await cypher(client, "MATCH (e:WriteAuditEvent) WHERE e.token_key = $k "
                                 "AND e.token_rest = $r RETURN properties(e) AS p, "
                                 "labels(e) AS labels", k=parts["token_key"],
                         r=parts["token_rest"])
    return row


async def blocks(client, chain: str) -> list[dict]:
    return [event_of(r["p"]) for r in await cypher(
        client, "MATCH (b:AuditBlock {settles: $c}) RETURN properties(b) AS p", c=chain)]


async def pinned(client, chain: str) -> dict[int, str]:
    """Each number of `chain` the blocks pin, and the MAC pinned there."""
    pins: dict[int, str] = {}
    for block in await blocks(client, chain):
        pins.update(zip(block["pins"], block["pin_macs"], strict=True))
    return pins


async def findings(client, *chains: str) -> list[str]:
    audit_log = services(client).audit_log
    return [f.describe() for f in await audit_log.verify(chains=set(chains))]


def lane(client) -> str:
    return services(client).audit_writer.chain


@contextlib.asynccontextmanager
async def batches_held(client):
    """No batch is written until the block ends."""
    gate = asyncio.Event()
    writer = services(client).audit_writer
    real_write = writer._write

    async def held(lane_, batch):
        await gate.wait()
        await real_write(lane_, batch)

    writer._write = held
    try:
        yield
    finally:
        gate.set()
        writer._write = real_write


async def test_a_create_s_event_is_stored_once_at_its_place_and_settled_by_a_block(
        client, admin_headers, tenant):
    resp = await create(client, admin_headers, metadata={"k": "v"})
    card = await resp.json()
    assert resp.status == 201
    # Stored complete by the create's own statement, as the request ended: before any batch.
    written = await stored_event(client, card["id"])
    assert sorted(written["labels"]) == ["AuditEvent", "WriteAuditEvent"]
    event = event_of(written["p"])
    assert (event["kind"], event["status"], event["outcome"], event["operation"]) == (
        "write", 201, "success", "token:create")
    assert event["transform"] and event["token_ids"] == [card["id"]]
    chain = event["chain"]
    assert await cypher(client, "MATCH (c:AuditChain {id: $c}) RETURN c.writes AS writes, "
                                "c.placed AS placed", c=chain) == [
        {"writes": True, "placed": True}]
    assert placed_holds(services(client).keyring, event)
    await settle(client)
    # Nothing more was written to it; a block in the lane's chain pins its MAC.
    assert (await stored_event(client, card["id"]))["p"] == written["p"]
    [block] = await blocks(client, chain)
    assert block["chain"] == lane(client) and block["kind"] == "block"
    assert dict(zip(block["pins"], block["pin_macs"], strict=True)) == {
        event["seq"]: event["mac"]}
    assert block.get("tenant_id") is None  # no tenant's GET /logs shows it
    # GET /logs shows the event as any other.
    resp = await client.get("/logs", params={"token_id": card["id"]}, headers=admin_headers)
    [shown] = (await resp.json())["data"]
    assert (shown["id"], shown["status"], shown["transform"]) == (
        event["id"], 201, event["transform"])
    assert "kind" not in shown and "chain" not in shown
    assert await findings(client, chain, lane(client)) == []
    # The export gives both, each holding at its own place.
    since = event["at"] - timedelta(seconds=1)
    exported = [e async for e in services(client).audit_log.export(
        since, datetime.now(UTC) + timedelta(seconds=1))
        if e["id"] in (event["id"], block["id"])]
    assert len(exported) == 2
    assert all(e["prev"] is None and placed_holds(services(client).keyring, e)
               for e in exported)


@pytest.mark.parametrize("write_chains", [3])
async def test_writes_take_their_places_in_the_writer_s_chains_in_turn(client, admin_headers):
    """With three chains of write events, four creates' events are placed one in each chain in
    turn, the fourth in the first again at its next number; the chains are made together, each
    marked `writes`, until the same time; the blocks pin every event in its own chain, and
    verification over the chains finds nothing."""
    cards = [await (await create(client, admin_headers)).json() for _ in range(4)]
    events = [event_of((await stored_event(client, card["id"]))["p"]) for card in cards]
    chains = [event["chain"] for event in events]
    assert len(set(chains[:3])) == 3 and chains[3] == chains[0]
    assert events[3]["seq"] == events[0]["seq"] + 1
    made = await cypher(client, "MATCH (c:AuditChain) WHERE c.id IN $ids "
                                "RETURN c.writes AS writes, c.until AS until", ids=chains[:3])
    assert len(made) == 3 and all(c["writes"] for c in made)
    assert len({c["until"] for c in made}) == 1
    await settle(client)
    for chain in set(chains):
        assert set(await pinned(client, chain)) >= {
            event["seq"] for event in events if event["chain"] == chain}
    assert await findings(client, *chains[:3], lane(client)) == []


@pytest.mark.parametrize("write_chains", [3])
async def test_a_set_of_write_chains_opened_short_is_used_then_made_whole(
        client, admin_headers, monkeypatch):
    """A chain that cannot be made leaves the writer placing events in those that were, and a
    whole set is made again once `_REOPEN_AFTER` has passed."""
    from vaultgraph.services import audit_writer as module

    writer = services(client).audit_writer
    repo = writer._repo
    made = len(writer._writes)
    assert made == 3
    open_write_chain, calls = repo.open_write_chain, []

    async def failing_third(chain, until):
        calls.append(chain)
        if len(calls) == 3:
            raise Unavailable("no chain")
        await open_write_chain(chain, until)

    monkeypatch.setattr(repo, "open_write_chain", failing_third)
    monkeypatch.setattr(module, "_REOPEN_AFTER", timedelta(0))
    writer._writes = ()
    assert await writer.open_writes()
    short = [w.chain for w in writer._writes]
    assert len(short) == 2
    card = await (await create(client, admin_headers)).json()
    assert event_of((await stored_event(client, card["id"]))["p"])["chain"] in short
    await writer._opening  # the create found the set short: a whole one is being made
    assert len(writer._writes) == 3 and not {w.chain for w in writer._writes} & set(short)


async def test_a_rolled_back_create_s_event_is_written_again_at_its_place(
        client, admin_headers):
    first = await create(client, admin_headers, id="tok-write-event-twice")
    assert first.status == 201
    again = await create(client, admin_headers, id="tok-write-event-twice")
    assert again.status == 409
    await settle(client)
    rows = await cypher(client, "MATCH (e:WriteAuditEvent) WHERE e.token_id = $id "
                                "RETURN properties(e) AS p ORDER BY e.seq",
                        id="tok-write-event-twice")
    events = [event_of(r["p"]) for r in rows]
    assert [(e["status"], e["outcome"]) for e in events] == [(201, "success"),
                                                             (409, "conflict")]
    assert len({e["chain"] for e in events}) == 1
    chain = events[0]["chain"]
    assert {e["seq"]: e["mac"] for e in events}.items() <= (await pinned(client, chain)).items()
    assert await findings(client, chain, lane(client)) == []


async def test_a_create_whose_commit_went_unconfirmed_has_its_answer_written_at_its_place(
        client, admin_headers, tenant, monkeypatch):
    """The statement committed, event and all, but its answer was lost: the request answers
    503, and the batch writes that answer over the event its write stored (one event at the
    place, the block pinning the 503), which a version put back is named for."""
    def answer_lost() -> None:
        raise Unavailable("the commit's answer was lost")

    monkeypatch.setattr(audit_context, "written", answer_lost)
    async with batches_held(client):
        resp = asyncio.create_task(create(client, admin_headers, id="tok-write-event-lost"))
        for _ in range(200):
            rows = await cypher(client, "MATCH (e:WriteAuditEvent) WHERE e.token_id = $id "
                                        "RETURN properties(e) AS p", id="tok-write-event-lost")
            if rows:
                break
            await asyncio.sleep(0.01)
        [first] = rows
    assert (await resp).status == 503
    monkeypatch.undo()
    await settle(client)
    rows = await cypher(client, "MATCH (e:WriteAuditEvent) WHERE e.token_id = $id "
                                "RETURN properties(e) AS p", id="tok-write-event-lost")
    [now] = [event_of(r["p"]) for r in rows]
    assert event_of(first["p"])["status"] == 201
    assert (now["status"], now["outcome"], now["seq"]) == (503, "unavailable",
                                                           first["p"]["seq"])
    chain = now["chain"]
    assert await findings(client, chain) == []
    # The version first stored, put back: it holds at its place, but is not the one pinned.
    await cypher(client, "MATCH (e:WriteAuditEvent {id: $id}) SET e = $p",
                 id=now["id"], p=first["p"])
    assert await findings(client, chain) == [
        f"edited: chain {chain} seq {now['seq']} (event {now['id']})"]


async def placed_card(client, headers) -> tuple[dict, str]:
    resp = await create(client, headers)
    card = await resp.json()
    await settle(client)
    return card, event_of((await stored_event(client, card["id"]))["p"])


async def test_verify_names_a_deleted_an_edited_and_a_moved_write_event(client, admin_headers):
    cards = [await placed_card(client, admin_headers) for _ in range(3)]
    chain = cards[0][1]["chain"]
    assert await findings(client, chain) == []
    (_, deleted), (_, edited), (_, moved) = cards
    await cypher(client, "MATCH (e:WriteAuditEvent {id: $id}) DETACH DELETE e", id=deleted["id"])
    await cypher(client, "MATCH (e:WriteAuditEvent {id: $id}) SET e.outcome = 'denied'",
                 id=edited["id"])
    # Moved to a number no write took (the constraint refuses one that is taken).
    await cypher(client, "MATCH (e:WriteAuditEvent {id: $id}) SET e.seq = 1000", id=moved["id"])
    assert await findings(client, chain) == [
        f"deleted: chain {chain} seq {deleted['seq']}",
        f"edited: chain {chain} seq {edited['seq']} (event {edited['id']})",
        f"deleted: chain {chain} seq {moved['seq']}",
        f"reordered: chain {chain} seq 1000 (event {moved['id']})"]


async def test_an_event_no_block_settles_is_named_until_one_does(client, admin_headers):
    """A request whose batch has not come (or whose process stopped before it): its event is
    checked by its MAC and named unsettled."""
    async with batches_held(client):
        resp = await create(client, admin_headers)
        card = await resp.json()
        event = event_of((await stored_event(client, card["id"]))["p"])
        assert await findings(client, event["chain"]) == [
            f"unsettled: chain {event['chain']} seq {event['seq']} (event {event['id']})"]
    await settle(client)
    assert await findings(client, event["chain"]) == []


@pytest.mark.parametrize("settle_wait", [30.0])
async def test_places_are_held_back_and_then_settled_together_by_one_block(
        client, admin_headers):
    """Places handed over as their writes stored them wait for a block past the batches that
    go by meanwhile (each event stored, named unsettled); once settled, one block pins them
    all."""
    cards = [await (await create(client, admin_headers)).json() for _ in range(3)]
    events = [event_of((await stored_event(client, card["id"]))["p"]) for card in cards]
    [chain] = {event["chain"] for event in events}
    resp = await client.get(f"/tokens/{cards[0]['id']}", headers=admin_headers)
    assert resp.status == 200  # its event's batch committed before it answered: no block
    assert await blocks(client, chain) == []
    assert sorted(await findings(client, chain)) == sorted(
        f"unsettled: chain {chain} seq {e['seq']} (event {e['id']})" for e in events)
    await settle(client)
    [block] = await blocks(client, chain)
    assert dict(zip(block["pins"], block["pin_macs"], strict=True)) == {
        e["seq"]: e["mac"] for e in events}
    assert await findings(client, chain, lane(client)) == []


@pytest.mark.parametrize("settle_wait", [30.0])
async def test_a_batch_s_worth_of_places_is_settled_without_waiting(client, admin_headers):
    writer = services(client).audit_writer
    writer._max_batch = 2
    cards = [await (await create(client, admin_headers)).json() for _ in range(2)]
    events = [event_of((await stored_event(client, card["id"]))["p"]) for card in cards]
    # One lane, batches in order: the read's batch commits after the places' block.
    await client.get(f"/tokens/{cards[0]['id']}", headers=admin_headers)
    [block] = await blocks(client, events[0]["chain"])
    assert sorted(block["pins"]) == sorted(e["seq"] for e in events)


@pytest.mark.parametrize("settle_wait", [0.0, 0.2])
async def test_places_are_settled_once_the_wait_has_passed(client, admin_headers, settle_wait):
    """No settle called: a block comes by itself, right after the write (`0`: the next batch,
    which a read's request then waits for) or once the wait has passed."""
    card = await (await create(client, admin_headers)).json()
    event = event_of((await stored_event(client, card["id"]))["p"])
    if settle_wait == 0:
        await client.get(f"/tokens/{card['id']}", headers=admin_headers)
        assert (await pinned(client, event["chain"])) == {event["seq"]: event["mac"]}
        return
    writer = services(client).audit_writer
    assert writer._unpinned  # held back: the writer is not idle until the wait has passed
    async with asyncio.timeout(10):
        await writer._idle.wait()
    assert (await pinned(client, event["chain"])) == {event["seq"]: event["mac"]}


@pytest.mark.parametrize("settle_wait", [30.0])
async def test_a_writer_stopping_settles_the_places_it_held_back(client, admin_headers):
    card = await (await create(client, admin_headers)).json()
    event = event_of((await stored_event(client, card["id"]))["p"])
    await services(client).audit_writer.stop()
    assert (await pinned(client, event["chain"])) == {event["seq"]: event["mac"]}


async def test_the_writes_mark_is_checked_against_the_events(client, admin_headers):
    _, event = await placed_card(client, admin_headers)
    chain, own = event["chain"], lane(client)
    await cypher(client, "MATCH (c:AuditChain {id: $c}) REMOVE c.writes", c=chain)
    # Read as a lane's chain: its holes below the highest number and the mark are named.
    assert f"edited: chain {chain} (event writes mark)" in await findings(client, chain)
    await cypher(client, "MATCH (c:AuditChain {id: $c}) SET c.writes = true", c=chain)
    await cypher(client, "MATCH (c:AuditChain {id: $c}) SET c.writes = true", c=own)
    assert f"edited: chain {own} (event writes mark)" in await findings(client, own)


async def test_a_block_deleted_with_what_it_pins_is_named_in_the_lane(client, admin_headers):
    _, event = await placed_card(client, admin_headers)
    [block] = await blocks(client, event["chain"])
    await cypher(client, "MATCH (e:AuditEvent) WHERE e.id IN [$a, $b] DETACH DELETE e",
                 a=block["id"], b=event["id"])
    assert await findings(client, event["chain"], lane(client)) == [
        f"deleted: chain {lane(client)} seq {block['seq']}"]


async def test_a_failed_batch_hands_its_places_to_the_next(client, admin_headers, monkeypatch):
    writer = services(client).audit_writer
    repo = writer._repo
    real = repo.write_batch
    failed = []

    async def once_down(created, linked, **kwargs):
        if kwargs.get("blocks") and not failed:
            failed.append(kwargs["blocks"])
            raise Unavailable("down for one batch")
        await real(created, linked, **kwargs)

    monkeypatch.setattr(repo, "write_batch", once_down)
    card, event = await placed_card(client, admin_headers)
    await client.get(f"/tokens/{card['id']}", headers=admin_headers)  # a batch after it
    await settle(client)
    assert failed  # the first block was not written; the next pinned the event
    [block] = await blocks(client, event["chain"])
    assert block["pins"] == [event["seq"]] and block["pin_macs"] == [event["mac"]]
    assert await findings(client, event["chain"]) == []


@pytest.mark.parametrize("ahead", [timedelta(0), timedelta(days=1)],
                         ids=["its-hour-not-past", "its-hour-past"])
async def test_a_prune_takes_a_chain_of_write_events_but_what_a_kept_block_pins(
        client, admin_headers, ahead):
    """Pruned as of now (the chain's hour began before the cutoff and ends after it), or as of
    a day ahead (its whole hour past)."""
    card, pruned = await placed_card(client, admin_headers)
    await client.get(f"/tokens/{card['id']}", headers=admin_headers)  # then a read's event
    await settle(client)
    _, kept = await placed_card(client, admin_headers)
    chain = kept["chain"]
    [held_block] = [b for b in await blocks(client, chain) if b["pins"] == [kept["seq"]]]
    # The lane's chain cannot be pruned past an edited event before the kept block: it stays,
    # and so does what it pins. The block before the edit goes, and its event with it.
    await cypher(client, "MATCH (e:AuditEvent) WHERE e.chain IN $cs AND e.seq = $s "
                         "SET e.outcome = 'denied'", cs=chain_forms(lane(client)),
                 s=held_block["seq"] - 1)
    pruner = services(client).audit_pruner
    await pruner.prune_before(datetime.now(UTC) + ahead)  # (other tests' chains too)
    left = await cypher(client, "MATCH (e:WriteAuditEvent) WHERE e.id IN [$a, $b] "
                                "RETURN e.id AS id", a=kept["id"], b=pruned["id"])
    assert left == [{"id": kept["id"]}]
    assert await blocks(client, chain) == [held_block]
    assert await findings(client, chain) == []


async def test_a_chain_of_write_events_pruned_empty_is_not_read_again(
        client, admin_headers, monkeypatch):
    """Each prune pass read every chain of write events whose hour began before its cutoff,
    emptied or not: one that holds no event any more is listed so, and not read again."""
    _, event = await placed_card(client, admin_headers)
    chain = event["chain"]
    pruner = services(client).audit_pruner
    repo = pruner._repo
    read: list[str] = []
    chain_events = repo.chain_events

    def reading(chain, **kwargs):
        read.append(chain)
        return chain_events(chain, **kwargs)

    monkeypatch.setattr(repo, "chain_events", reading)
    ahead = datetime.now(UTC) + timedelta(days=1)
    [before] = [info for info in await repo.chains() if info.chain == chain]
    assert before.writes and before.holds
    await pruner.prune_before(ahead)  # (other tests' chains too)
    assert chain in read
    [after] = [info for info in await repo.chains() if info.chain == chain]
    assert after.writes and not after.holds
    read.clear()
    await pruner.prune_before(ahead)
    assert chain not in read


@pytest.mark.parametrize("left", ["nothing", "a write event", "an event", "a block",
                                  "its hour ended just now", "its hour to come"])
async def test_a_chain_of_write_events_past_its_hour_and_empty_is_retired(client, left):
    """A process opens several chains of write events an hour, and each prune pass lists every
    chain: one whose numbers ended before the cutoff and an hour before now, and that holds
    nothing verification reads (no event of any kind, in either form of the chain's id; no
    block naming it), is deleted. One that holds anything, or whose hour ended less than an
    hour ago (a writer's clock may run behind), stays."""
    pruner = services(client).audit_pruner
    repo = pruner._repo
    now = datetime.now(UTC)
    chain, node = new_chain_id(), str(uuid.uuid4())
    until = {"its hour to come": now + timedelta(hours=1),
             "its hour ended just now": now - timedelta(minutes=30)}.get(
                 left, now - timedelta(days=2))
    try:
        await repo.open_write_chain(chain, until)
        if left == "a write event":
            await cypher(client, "CREATE (:AuditEvent:WriteAuditEvent {id: $id, chain: $c, "
                                 "seq: 1, kind: 'write'})", id=node, c=int(chain))
        elif left == "an event":  # not marked a write event, the chain's id as text
            await cypher(client, "CREATE (:AuditEvent {id: $id, chain: $c, seq: 1})",
                         id=node, c=chain)
        elif left == "a block":
            await cypher(client, "CREATE (:AuditEvent:AuditBlock {id: $id, settles: $c, "
                                 "pins: [1]})", id=node, c=chain)
        await pruner.prune_before(now + timedelta(days=1))  # (other tests' chains too)
        kept = [info.chain for info in await repo.chains() if info.chain == chain]
        assert kept == ([] if left == "nothing" else [chain])
    finally:
        await cypher(client, "MATCH (e:AuditEvent {id: $id}) DETACH DELETE e", id=node)
        await cypher(client, "MATCH (c:AuditChain {id: $c}) DETACH DELETE c", c=chain)


async def test_a_child_s_event_names_both_tokens_and_is_found_by_each_once(client, admin_headers):
    """A child token's create names its parent too: its write gives the event an AUDIT_REF a
    token, and the event written again at its place (a taken id, here) has them once each."""
    parent = await (await create(client, admin_headers)).json()
    for expected in (201, 409):
        resp = await client.post(f"/tokens/{parent['id']}/children",
                                 json={"type": "card", "id": "tok-write-event-child",
                                       "data": {"number": CANARY}}, headers=admin_headers)
        assert resp.status == expected, await resp.text()
    await settle(client)
    for token_id in (parent["id"], "tok-write-event-child"):
        resp = await client.get("/logs", params={"token_id": token_id}, headers=admin_headers)
        shown = [(e["route"], e["status"]) for e in (await resp.json())["data"]
                 if e["route"] == "POST /tokens/{parent_id}/children"]
        assert sorted(shown) == [("POST /tokens/{parent_id}/children", 201),
                                 ("POST /tokens/{parent_id}/children", 409)], token_id
    rows = await cypher(client, "MATCH (e:WriteAuditEvent)-[r:AUDIT_REF]->(e) "
                                "WHERE e.status = 409 AND e.route = $route "
                                "AND e.token_ids IS NOT NULL RETURN e.id AS id, count(r) AS refs",
                        route=ROUTE_NUMBER)
    assert rows and all(r["refs"] == 2 for r in rows)
    chains = {event_of(r["p"])["chain"] for r in await cypher(
        client, "MATCH (e:WriteAuditEvent) WHERE e.route = $route RETURN properties(e) AS p",
        route=ROUTE_NUMBER)}
    assert await findings(client, *chains) == []


async def events_of(client, route: str) -> list[dict]:
    """Every event of `route`, as stored, each with its labels, ordered by time."""
    rows = await cypher(client, "MATCH (e:AuditEvent) WHERE e.route = $route RETURN "
                                "properties(e) AS p, labels(e) AS labels ORDER BY e.at",
                        route=route_number(route))
    return [{**event_of(r["p"]), "labels": sorted(r["labels"])} for r in rows]


async def test_a_tokenize_s_event_is_stored_once_at_its_place_unless_an_item_may_dedup(
        client, admin_headers):
    """A tokenize without dedup declares how it ends (200, each item shown): its write stores
    the event complete at its place, with an AUDIT_REF a token; an item whose id turns out
    taken ends it otherwise, and the event is written again there; an item that may find its
    twin keeps the event on the path of a write that declares nothing."""
    cards = [{"type": "card", "data": {"number": CANARY}} for _ in range(3)]
    taken = await (await create(client, admin_headers, id="tok-write-event-tokenize")).json()
    for body in (cards, [*cards[:2], {**cards[2], "id": taken["id"]}],
                 [*cards[:2], {**cards[2], "deduplicate_token": True}]):
        resp = await client.post("/tokenize", json=body, headers=admin_headers)
        assert resp.status == 200, await resp.text()
    answers = await resp.json()
    assert not any("status" in a for a in answers)
    # The first two stored by their writes at their places; the third by its write, pending,
    # and linked by a batch its answer does not wait for (which may still be to come).
    stored = await events_of(client, "POST /tokenize")
    assert [e["labels"] for e in stored[:2]] == [["AuditEvent", "WriteAuditEvent"]] * 2
    assert "WriteAuditEvent" not in stored[2]["labels"]
    first = stored[0]
    assert (first["kind"], first["status"], first["outcome"], len(first["token_ids"]),
            first.get("transform_counts")) == ("write", 200, "success", 3, None)
    assert first["transform"] and placed_holds(services(client).keyring, first)
    await settle(client)
    now = await events_of(client, "POST /tokenize")
    assert now[0] == first  # ended as expected: nothing more written
    # The second expected three tokens shown; its third id was taken, so two were: written
    # again at its place as it ended, the taken id named.
    assert (now[1]["kind"], now[1]["chain"], now[1]["status"], now[1]["transform"]) == (
        "write", first["chain"], 200, first["transform"])
    assert taken["id"] in now[1]["token_ids"] and placed_holds(services(client).keyring, now[1])
    assert now[2]["status"] == 200 and {a["id"] for a in answers} <= set(now[2]["token_ids"])
    assert now[2]["labels"] == ["AuditEvent"]  # linked
    refs = await cypher(client, "MATCH (e:WriteAuditEvent)-[r:AUDIT_REF]->(e) WHERE "
                                "e.route = $route RETURN e.id AS id, count(r) AS refs",
                        route=route_number("POST /tokenize"))
    assert sorted(r["refs"] for r in refs) == [3, 3]
    chain = first["chain"]
    assert {e["seq"]: e["mac"] for e in now[:2]}.items() <= (await pinned(client, chain)).items()
    assert await findings(client, chain, lane(client)) == []
    resp = await client.get("/logs", params={"token_id": answers[0]["id"]},
                            headers=admin_headers)
    assert [e["route"] for e in (await resp.json())["data"]] == ["POST /tokenize"]


async def test_an_update_a_delete_and_an_unlink_store_their_events_once_at_their_places(
        client, admin_headers):
    """Each declares how it ends (an update after reading the token: 200,
    shown under its transform; a delete and an unlink 204): its change's statement stores the
    event complete at its place. One that ends otherwise (a 404 delete) has it written again
    there; an update of no token sent no change, and its event is created by a batch; a link,
    which cannot say whether the link was there, keeps the pending path."""
    parent = await (await create(client, admin_headers)).json()
    child = await (await create(client, admin_headers)).json()
    calls = [("POST", f"/tokens/{parent['id']}/children/{child['id']}", None, 201),
             ("PATCH", f"/tokens/{child['id']}", {"metadata": {"k": "v"}}, 200),
             ("PATCH", "/tokens/tok-write-event-none", {"metadata": {"k": "v"}}, 404),
             ("DELETE", f"/tokens/{parent['id']}/children/{child['id']}", None, 204),
             ("DELETE", f"/tokens/{child['id']}", None, 204),
             ("DELETE", "/tokens/tok-write-event-none", None, 404)]
    for method, path, patch, status in calls:
        headers = {**admin_headers, "Content-Type": "application/merge-patch+json"}
        resp = await client.request(method, path, headers=headers,
                                    data=None if patch is None else orjson.dumps(patch))
        assert resp.status == status, (method, path, await resp.text())
    await settle(client)
    written = ["AuditEvent", "WriteAuditEvent"]
    linked = await events_of(client, "POST /tokens/{parent_id}/children/{child_id}")
    assert [(e["labels"], e["status"], e.get("kind")) for e in linked] == [
        (["AuditEvent"], 201, None)]
    updates = await events_of(client, "PATCH /tokens/{id}")
    assert [(e["labels"], e["status"], e.get("kind")) for e in updates] == [
        (written, 200, "write"), (["AuditEvent"], 404, None)]
    assert updates[0]["transform"] and updates[0]["token_ids"] == [child["id"]]
    unlinked = await events_of(client, "DELETE /tokens/{parent_id}/children/{child_id}")
    assert [(e["labels"], e["status"], e["kind"], sorted(e["token_ids"])) for e in unlinked] == [
        (written, 204, "write", sorted([parent["id"], child["id"]]))]
    deletes = await events_of(client, "DELETE /tokens/{id}")
    assert [(e["labels"], e["status"], e["kind"]) for e in deletes] == [
        (written, 204, "write"), (written, 404, "write")]
    placed = [updates[0], *unlinked, *deletes]
    keyring = services(client).keyring
    assert all(placed_holds(keyring, e) for e in placed)
    chain = placed[0]["chain"]
    assert {e["chain"] for e in placed} == {chain}
    assert {e["seq"]: e["mac"] for e in placed}.items() <= (await pinned(client, chain)).items()
    assert await findings(client, chain, lane(client)) == []


async def test_an_update_written_again_under_its_lock_stores_its_event_once(
        client, admin_headers, tenant):
    """An update's first write, without the token's lock, finds the token changed meanwhile
    (here updated, then deleted): that statement writes nothing, its request's event neither
    (the prefix comes after the check, AUDIT_HERE), and the update runs again under the lock,
    where its write stores the event at the same place. One event a request, as the request
    ended: 200 as declared, or a 404 written at its place as the request ends."""
    headers = {**admin_headers, "Content-Type": "application/merge-patch+json"}
    ids = []
    for _ in range(2):
        resp = await client.post("/tokens", json={"type": "token", "data": {"a": 1}},
                                 headers=admin_headers)
        ids.append((await resp.json())["id"])
    updated, deleted = ids
    token = "MATCH (t:Token {tenant_id: $tenant_id, id: $id}) "
    [before] = await cypher(client, token + "RETURN properties(t) AS p",
                            tenant_id=tenant.tenant_id, id=updated)
    resp = await client.patch(f"/tokens/{updated}", data=orjson.dumps({"data": {"b": 2}}),
                              headers=headers)
    assert resp.status == 200
    [after] = await cypher(client, token + "RETURN properties(t) AS p",
                           tenant_id=tenant.tenant_id, id=updated)
    await cypher(client, token + "SET t = $p", tenant_id=tenant.tenant_id, id=updated,
                 p=before["p"])
    app = client.server.app

    async def patch(token_id: str, status: int) -> None:
        resp = await client.patch(f"/tokens/{token_id}", headers=headers,
                                  data=orjson.dumps({"metadata": {"k": "v"}}))
        assert resp.status == status, await resp.text()

    await blocked_behind(app, [(token + "SET t = $p", {"tenant_id": tenant.tenant_id,
                                                      "id": updated, "p": after["p"]})],
                         patch(updated, 200), statement="tokens/update")
    await blocked_behind(app, held_delete(app, tenant.tenant_id, deleted),
                         patch(deleted, 404), statement="tokens/update")
    await settle(client)
    updates = [e for e in await events_of(client, "PATCH /tokens/{id}")
               if set(e["token_ids"]) & set(ids)]
    written = ["AuditEvent", "WriteAuditEvent"]
    assert [(e["labels"], e["status"], e.get("kind"), e["token_ids"]) for e in updates] == [
        (written, 200, "write", [updated]), (written, 200, "write", [updated]),
        (written, 404, "write", [deleted])]
    keyring = services(client).keyring
    assert all(placed_holds(keyring, e) for e in updates)
    chain = updates[0]["chain"]
    assert await findings(client, chain, lane(client)) == []


def cancelled(*_args, **_kwargs) -> None:
    raise asyncio.CancelledError


@pytest.mark.parametrize(("step", "extra"), [
    ("vaultgraph.services.tokens.expect", {}), ("vaultgraph.audit.context.written", {}),
    ("vaultgraph.audit.context.written", {"deduplicate_token": True})],
    ids=["before-its-write", "after-its-write-placed", "after-its-write-pending"])
async def test_a_request_cancelled_unanswered_still_leaves_its_event(
        client, admin_headers, monkeypatch, step, extra):
    """The server stopping with a create unanswered cancels it (past the errors middleware):
    its event is still handed over, as left unanswered (499), at its write's place, linked
    to what its write stored, or created when no write was sent; nothing is left for verify
    to name."""
    trace = uuid.uuid4().hex
    monkeypatch.setattr(step, cancelled)
    with contextlib.suppress(aiohttp.ClientError):
        async with asyncio.timeout(30):
            resp = await create(client, {**admin_headers, "SVC-TRACE-ID": trace}, **extra)
            pytest.fail(f"answered {resp.status}")
    monkeypatch.undo()
    await settle(client)
    rows = await cypher(client, "MATCH (e:AuditEvent) WHERE e.trace_id = $t "
                                "RETURN properties(e) AS p, labels(e) AS labels", t=trace)
    [row] = rows
    event = event_of(row["p"])
    assert (event["status"], event["outcome"], event["reason"]) == (
        499, "unavailable", "cancelled")
    placed = step.endswith("written") and not extra
    assert ("WriteAuditEvent" in row["labels"]) == placed
    assert "PendingAuditEvent" not in row["labels"]
    assert await findings(client, event["chain"], lane(client)) == []
