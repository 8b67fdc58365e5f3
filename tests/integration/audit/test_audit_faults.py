"""Neo4j going away under load (docs/audit.md): nothing is acknowledged that was not recorded.

A private Neo4j of the test's own is stopped while reads pour in; every 200 the clients got
must have its event in the database once it is back, every other answer is a 503 without data.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid

import pytest
from factories import PRIVATE_PASSWORD, database, new_tenant, private_neo4j

from vaultgraph.app import create_app
from vaultgraph.audit.ids import query_ids

CANARY = "4111111111111111"
CLIENTS = 8


@pytest.fixture
def private(tmp_path_factory):
    with private_neo4j(tmp_path_factory.mktemp("neo4j-audit")) as neo:
        yield neo


async def test_stopping_neo4j_under_load_acknowledges_nothing_unrecorded(
        dead_sockets_collected, aiohttp_client, settings, private):
    own = dataclasses.replace(settings, neo4j_uri=private.uri, neo4j_password=PRIVATE_PASSWORD,
                              log_level="CRITICAL")
    client = await aiohttp_client(create_app(own))
    tenant = await new_tenant(client.server.app, "audit-faults")
    headers = {"SVC-API-KEY": tenant.key}
    resp = await client.post("/tokens", json={"type": "card", "data": {"number": CANARY}},
                             headers=headers)
    assert resp.status == 201, await resp.text()  # a problem says why
    token_id = (await resp.json())["id"]

    answers: list[tuple[str, int, bytes]] = []
    counts = {200: 0, 503: 0}
    served, refused_enough, stopping = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def reads() -> None:
        while not stopping.is_set():
            trace = uuid.uuid4().hex
            got = await client.get(f"/tokens/{token_id}",
                                   headers={**headers, "SVC-TRACE-ID": trace})
            answers.append((trace, got.status, await got.read()))
            counts[got.status] = counts.get(got.status, 0) + 1
            if counts[200] >= 50:
                served.set()
            if counts[503] >= 20:
                refused_enough.set()

    load = [asyncio.create_task(reads()) for _ in range(CLIENTS)]
    await asyncio.wait_for(served.wait(), 120)
    await asyncio.to_thread(private.stop)
    await asyncio.wait_for(refused_enough.wait(), 120)
    stopping.set()
    _, pending = await asyncio.wait(load, timeout=60)
    for task in pending:  # a request still waiting was never answered, so never acknowledged
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    await asyncio.to_thread(private.start)
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(
        "MATCH (e:AuditEvent {tenant_key: $tenant_key, tenant_rest: $tenant_rest}) "
        "RETURN e.trace_id AS trace",
        {k: v for k, v in query_ids(tenant_id=tenant.tenant_id).items() if k != "tenant_id"},
        database_=db.database)
    recorded = {r["trace"] for r in records}

    statuses = {status for _, status, _ in answers}
    assert statuses <= {200, 503}, statuses
    acknowledged = [trace for trace, status, _ in answers if status == 200]
    assert len(acknowledged) >= 50
    assert [t for t in acknowledged if t not in recorded] == []
    refused = [body for _, status, body in answers if status == 503]
    assert len(refused) >= 20
    assert all(CANARY.encode() not in body for body in refused)
