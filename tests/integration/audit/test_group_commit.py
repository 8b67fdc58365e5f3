"""The writer's group commit: a batch waits for the events of requests announced in flight
(bounded by its wait), and for nothing else; a lone event is written at once."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

from factories import database
from prometheus_client import REGISTRY

from vaultgraph.api.typedefs import services_key
from vaultgraph.audit import context as audit_context
from vaultgraph.errors import Unavailable
from vaultgraph.repository.audit import AuditRepository
from vaultgraph.services.audit_writer import AuditWriter

# Far longer than any test may take: a batch that waited for it would hang the test, which the
# guard below turns into a failure instead.
FOREVER = 3600.0
GUARD = 30.0


def event(tenant) -> dict:
    return {"id": str(uuid.uuid4()), "at": datetime.now(UTC), "tenant_id": tenant.tenant_id,
            "application_id": tenant.application_id, "key_id": None,
            "operation": "token:read", "route": "GET /tokens/{id}", "token_ids": [],
            "outcome": "success", "status": 200, "transform": None, "transform_counts": None,
            "trace_id": None, "client_ip": "127.0.0.1", "user_agent": "test", "reason": None}


def writer_for(client) -> AuditWriter:
    app = client.server.app
    return AuditWriter(AuditRepository(database(app)), app[services_key].keyring,
                       max_wait=FOREVER)


def batches() -> float:
    return REGISTRY.get_sample_value("vaultgraph_audit_batches_total") or 0.0


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def stored(client, ids: list[str]) -> list[tuple[str, int]]:
    records, _, _ = await database(client.server.app).driver.execute_query(
        "MATCH (e:AuditEvent) WHERE e.id IN $ids RETURN toString(e.chain) AS chain, e.seq AS seq "
        "ORDER BY seq", ids=ids, database_="neo4j")
    return [(r["chain"], r["seq"]) for r in records]


async def test_a_lone_event_is_written_without_waiting(client, tenant):
    writer = writer_for(client)
    try:
        with writer.arriving() as arrival:
            e = event(tenant)
            async with asyncio.timeout(GUARD):
                await writer.record(e, arrival)
        assert await stored(client, [e["id"]]) == [(writer.chain, 1)]
    finally:
        await writer.stop()


async def test_a_writer_first_handed_an_event_inside_a_request_stores_no_event_of_it_twice(
        client, tenant):
    """The writer's task starts with the first event handed to it. Started from inside a
    request (its audit note current, as a write's statement sees it), a task that kept that
    context would send every batch as the request's write, which stores the request's event
    again: the second batch would be refused by the pending events' unique id and fail its
    requests closed. Its task runs in a context of its own."""
    writer = AuditWriter(AuditRepository(database(client.server.app)),
                         client.server.app[services_key].keyring, max_wait=0)
    note = audit_context.AuditNote(id=str(uuid.uuid4()), at=datetime.now(UTC),
                                   operation="token:read", route="GET /tokens/{id}",
                                   trace_id=None, client_ip="127.0.0.1", user_agent="test")
    note.principal = SimpleNamespace(tenant_id=tenant.tenant_id, key_id=None,
                                     application_id=tenant.application_id)
    events = [event(tenant) for _ in range(3)]
    token = audit_context.current.set(note)
    try:
        async with asyncio.timeout(GUARD):
            await writer.record(events[0])
    finally:
        audit_context.current.reset(token)
    try:
        async with asyncio.timeout(GUARD):
            for e in events[1:]:
                await writer.record(e)  # one batch each: the second is where it failed
        assert await stored(client, [e["id"] for e in events]) == [
            (writer.chain, 1), (writer.chain, 2), (writer.chain, 3)]
        assert await stored(client, [note.id]) == []
    finally:
        await writer.stop()


async def test_a_batch_waits_for_the_requests_in_flight_then_commits_them_together(
        client, tenant):
    writer = writer_for(client)
    try:
        first, second = event(tenant), event(tenant)
        with writer.arriving() as a1, writer.arriving() as a2:
            before = batches()
            recording = asyncio.create_task(writer.record(first, a1))
            await settle()
            assert not recording.done()  # the second request is still in flight
            async with asyncio.timeout(GUARD):
                await asyncio.gather(recording, writer.record(second, a2))
        assert batches() - before == 1
        assert await stored(client, [first["id"], second["id"]]) == [
            (writer.chain, 1), (writer.chain, 2)]
    finally:
        await writer.stop()


async def test_a_request_that_leaves_without_an_event_releases_the_batch(client, tenant):
    writer = writer_for(client)
    try:
        e = event(tenant)
        with writer.arriving() as arrival:
            leaving = writer.arriving()
            leaving.__enter__()
            recording = asyncio.create_task(writer.record(e, arrival))
            await settle()
            assert not recording.done()
            leaving.__exit__(None, None, None)  # e.g. cancelled before its event was made
            async with asyncio.timeout(GUARD):
                await recording
        assert await stored(client, [e["id"]]) == [(writer.chain, 1)]
    finally:
        await writer.stop()


async def test_the_wait_for_company_is_bounded(client, tenant):
    app = client.server.app
    writer = AuditWriter(AuditRepository(database(app)), app[services_key].keyring,
                         max_wait=0.05)
    try:
        e = event(tenant)
        with writer.arriving() as arrival, writer.arriving():  # the other never hands over
            async with asyncio.timeout(GUARD):
                await writer.record(e, arrival)
        assert await stored(client, [e["id"]]) == [(writer.chain, 1)]
    finally:
        await writer.stop()


async def test_two_lanes_commit_side_by_side_and_each_chain_stays_whole(client, tenant):
    """While one lane's batch commits, the next batch goes to the other lane: both chains get
    events, each numbered 1..n without a gap, and both verify."""
    app = client.server.app
    writer = AuditWriter(AuditRepository(database(app)), app[services_key].keyring,
                         max_wait=0, max_batch=5, lanes=2)
    try:
        events = [event(tenant) for _ in range(60)]
        async with asyncio.timeout(GUARD):
            await asyncio.gather(*(writer.record(e) for e in events))
        rows = await stored(client, [e["id"] for e in events])
        by_chain: dict[str, list[int]] = {}
        for chain, seq in rows:
            by_chain.setdefault(chain, []).append(seq)
        assert set(by_chain) == writer.chains and len(by_chain) == 2
        for seqs in by_chain.values():
            assert seqs == list(range(1, len(seqs) + 1))
        assert sum(map(len, by_chain.values())) == 60
        assert await app[services_key].audit_log.verify(chains=writer.chains) == []
    finally:
        await writer.stop()


async def test_a_failed_batch_ends_its_own_lane_only(client, tenant):
    """A batch Neo4j refuses (here: an event with a map value, which no property can hold)
    fails its requests closed and starts a new chain for its lane; the other lane's chain goes
    on where it was."""
    app = client.server.app
    writer = AuditWriter(AuditRepository(database(app)), app[services_key].keyring,
                         max_wait=0, max_batch=1, lanes=2)
    try:
        refused, other = {**event(tenant), "reason": {"not": "a property"}}, event(tenant)
        first, second = writer._lanes[0].chain, writer._lanes[1].chain
        async with asyncio.timeout(GUARD):
            results = await asyncio.gather(writer.record(refused), writer.record(other),
                                           return_exceptions=True)
        assert isinstance(results[0], Unavailable) and results[1] is None
        assert await stored(client, [refused["id"], other["id"]]) == [(second, 1)]
        assert first not in writer.chains and second in writer.chains
        later = [event(tenant), event(tenant)]
        async with asyncio.timeout(GUARD):
            await asyncio.gather(*(writer.record(e) for e in later))
        assert sorted(await stored(client, [e["id"] for e in later])) == sorted(
            [(writer._lanes[0].chain, 1), (second, 2)])
        assert await app[services_key].audit_log.verify(chains=writer.chains) == []
    finally:
        await writer.stop()


async def test_stop_writes_what_arrives_while_it_stops_and_forks_no_chain(client, tenant):
    """Events handed over while the writer stops (a sweep still running at shutdown) are
    written too, each lane still one batch at a time: no (chain, seq) twice, no gap. (The
    interleaving that forked a chain before, a late event taking the lane stop() was writing
    on, depends on timing this test does not control; it floods the whole stop with events.)"""
    app = client.server.app
    writer = AuditWriter(AuditRepository(database(app)), app[services_key].keyring,
                         max_wait=0, max_batch=2, lanes=2)
    early = [event(tenant) for _ in range(6)]
    recording = [asyncio.create_task(writer.record(e)) for e in early]
    await asyncio.sleep(0)  # batches are in flight
    stopping = asyncio.create_task(writer.stop())
    late = []
    async with asyncio.timeout(GUARD):
        while not stopping.done() and len(late) < 300:  # one event at every turn of the loop
            late.append(event(tenant))
            writer.record_later(late[-1])
            await asyncio.sleep(0)
        await stopping
        await writer.settle()
        await asyncio.gather(*recording)
    rows = await stored(client, [e["id"] for e in early + late])
    assert len(rows) == len(early + late) and len(set(rows)) == len(rows)
    by_chain: dict[str, list[int]] = {}
    for chain, seq in rows:
        by_chain.setdefault(chain, []).append(seq)
    for seqs in by_chain.values():
        assert sorted(seqs) == list(range(1, len(seqs) + 1))
    assert await app[services_key].audit_log.verify(chains=set(by_chain)) == []


async def test_a_batch_that_would_fork_its_chain_is_refused_by_neo4j(client, tenant):
    """Two writers on one chain id (a process cloned with its state, a bug): the first batch
    numbers 1..2 into the chain; the second writer, which believes the chain is empty, is
    refused by the statement itself (the chain's head is at 2, not 0), writes nothing, fails its
    request closed and starts a new chain. The shared chain keeps one event per number."""
    app = client.server.app
    one, two = (AuditWriter(AuditRepository(database(app)), app[services_key].keyring,
                            max_wait=0, lanes=1) for _ in range(2))
    shared = one.chain
    two._lanes[0].chain = shared
    try:
        first = [event(tenant), event(tenant)]
        async with asyncio.timeout(GUARD):
            await asyncio.gather(*(one.record(e) for e in first))
            forked = event(tenant)
            results = await asyncio.gather(two.record(forked), return_exceptions=True)
        assert isinstance(results[0], Unavailable)
        assert await stored(client, [forked["id"]]) == []
        assert two.chain != shared
        assert sorted(await stored(client, [e["id"] for e in first])) == [(shared, 1),
                                                                           (shared, 2)]
        later = event(tenant)
        async with asyncio.timeout(GUARD):
            await one.record(later)  # the rightful writer goes on where it was
        assert await stored(client, [later["id"]]) == [(shared, 3)]
        assert await app[services_key].audit_log.verify(chains={shared}) == []
    finally:
        await one.stop()
        await two.stop()


async def test_two_writers_racing_on_one_chain_head_commit_one_batch(client, tenant):
    """Two writers that both believe the chain's head is at 2 commit at once: the statement's
    lock on the head lets one through (numbers 3) and refuses the other, which finds the head
    moved once it gets the lock. The chain holds each number once and verifies."""
    app = client.server.app
    one = AuditWriter(AuditRepository(database(app)), app[services_key].keyring,
                      max_wait=0, lanes=1)
    racers = [AuditWriter(AuditRepository(database(app)), app[services_key].keyring,
                          max_wait=0, lanes=1) for _ in range(2)]
    shared = one.chain
    try:
        first = [event(tenant), event(tenant)]
        async with asyncio.timeout(GUARD):
            await asyncio.gather(*(one.record(e) for e in first))
        for racer in racers:  # each a copy of the first writer's state
            racer._lanes[0].chain, racer._lanes[0].seq = shared, 2
        raced = [event(tenant), event(tenant)]
        async with asyncio.timeout(GUARD):
            results = await asyncio.gather(*(r.record(e) for r, e in zip(racers, raced,
                                                                              strict=True)),
                                           return_exceptions=True)
        assert sorted(type(r).__name__ for r in results) == ["NoneType", "Unavailable"]
        rows = await stored(client, [e["id"] for e in first + raced])
        assert sorted(seq for chain, seq in rows if chain == shared) == [1, 2, 3]
        assert len(rows) == 3
        assert await app[services_key].audit_log.verify(chains={shared}) == []
    finally:
        for w in (one, *racers):
            await w.stop()
