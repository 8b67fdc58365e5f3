"""Liveness, readiness, the error shape and the trace id."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from factories import PRIVATE_PASSWORD, private_neo4j

from vaultgraph.app import create_app

PROBLEM_KEYS = {"type", "title", "status", "detail"}


async def test_health_answers_without_a_key(client):
    resp = await client.get("/health")
    assert resp.status == 200
    assert await resp.json() == {"status": "ok"}


async def test_ready_answers_when_neo4j_is_up(client):
    resp = await client.get("/ready")
    assert resp.status == 200
    assert (await resp.json())["status"] == "ready"


async def test_unknown_route_is_a_problem(client):
    resp = await client.get("/no-such-route")
    assert resp.status == 404
    assert resp.content_type == "application/problem+json"
    body = await resp.json()
    assert PROBLEM_KEYS <= set(body)
    assert body["status"] == 404
    assert body["type"].endswith("/not-found")


async def test_wrong_method_is_a_405_problem_with_allow(client):
    resp = await client.delete("/health")
    assert resp.status == 405
    assert resp.content_type == "application/problem+json"
    assert "GET" in resp.headers["Allow"]


async def test_trace_id_is_echoed(client):
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"  # a W3C trace id: the one form taken
    resp = await client.get("/health", headers={"SVC-TRACE-ID": trace})
    assert resp.headers["SVC-TRACE-ID"] == trace


async def test_trace_id_is_generated_when_absent_or_malformed(client):
    resp = await client.get("/health", headers={"SVC-TRACE-ID": "bad id with spaces"})
    generated = resp.headers["SVC-TRACE-ID"]
    assert generated != "bad id with spaces"
    assert len(generated) == 32


@pytest.fixture
def private(tmp_path_factory):
    with private_neo4j(tmp_path_factory.mktemp("neo4j-ready")) as neo:
        yield neo


async def test_ready_is_503_while_neo4j_is_down_and_recovers(aiohttp_client, settings,
                                                             private):
    own = dataclasses.replace(settings, neo4j_uri=private.uri,
                              neo4j_password=PRIVATE_PASSWORD)
    client = await aiohttp_client(create_app(own))
    last = await client.get("/ready")
    assert last.status == 200, await last.text()

    await asyncio.to_thread(private.stop)
    down = await client.get("/ready")
    assert down.status == 503
    assert down.content_type == "application/problem+json"
    assert down.headers["Retry-After"]
    body = await down.json()
    assert body["status"] == 503
    assert PRIVATE_PASSWORD not in await down.text()

    await asyncio.to_thread(private.start)
    # Bolt answers before Neo4j's database is open: until then /ready is a bounded 503 with
    # Retry-After (the request deadline), never a hang; then 200 without a restart.
    statuses = []
    for _ in range(30):
        last = await client.get("/ready")
        statuses.append(last.status)
        if last.status == 200:
            break
        assert last.status == 503 and last.headers["Retry-After"]
    assert statuses[-1] == 200, statuses
