"""A request that the database cannot answer in time while the service is still starting (before
`/ready` turns 200: on a freshly started Neo4j, its first plans take seconds each) is told so:
its 503 says the service is starting and names `/ready`, instead of blaming the database or the
audit trail. Once started, the same failure keeps its own detail."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from factories import database, new_tenant

from vaultgraph.api.middleware import STARTING
from vaultgraph.api.typedefs import services_key
from vaultgraph.app import create_app
from vaultgraph.deadline import deadline
from vaultgraph.errors import Unavailable

CARD = {"type": "card", "data": {"number": "4242424242424242"}}


@pytest.fixture
async def starting(aiohttp_client, settings):
    """An app whose background start-up never ran (its readiness says starting)."""
    return await aiohttp_client(create_app(settings, background_start=True,
                                           schema_applied=True))


def no_time_left(monkeypatch, app) -> None:
    """Every statement a request sends finds its deadline passed and answers 503 at once; the
    audit writer's batches (no request's budget) keep their time and write the events."""
    db = database(app)
    own = db._deadline

    def passed(budgeted: bool = True) -> float:
        in_request = budgeted and deadline.get() is not None
        return asyncio.get_running_loop().time() if in_request else own(budgeted)

    monkeypatch.setattr(db, "_deadline", passed)


async def test_a_request_before_ready_is_told_the_service_is_starting(starting, monkeypatch):
    app = starting.server.app
    assert not app[services_key].readiness.started
    tenant = await new_tenant(app, "test")
    no_time_left(monkeypatch, app)
    resp = await starting.post("/tokens", json=CARD, headers={"SVC-API-KEY": tenant.key})
    problem = await resp.json()
    assert resp.status == 503, problem
    assert problem["detail"] == STARTING and "/ready" in STARTING
    assert resp.headers["Retry-After"] == "5"


async def test_the_same_failure_once_started_keeps_its_detail(starting, monkeypatch):
    app = starting.server.app
    app[services_key].readiness.started = True
    tenant = await new_tenant(app, "test")
    no_time_left(monkeypatch, app)
    resp = await starting.post("/tokens", json=CARD, headers={"SVC-API-KEY": tenant.key})
    problem = await resp.json()
    assert resp.status == 503, problem
    assert "starting" not in problem["detail"] and "/ready" not in problem["detail"]


async def test_an_audit_event_not_written_in_time_before_ready_says_so_too(
        aiohttp_client, settings, monkeypatch):
    """The other way a request runs out of time: its event's batch does not commit within what
    is left of its budget (the audit middleware's answer)."""
    client = await aiohttp_client(create_app(
        dataclasses.replace(settings, request_timeout=1.0), background_start=True,
        schema_applied=True))
    app = client.server.app
    tenant = await new_tenant(app, "test")
    writer = app[services_key].audit_writer
    release = asyncio.Event()
    write_batch = writer._repo.write_batch

    async def held(*args, **kwargs):
        await release.wait()
        return await write_batch(*args, **kwargs)

    monkeypatch.setattr(writer._repo, "write_batch", held)
    try:
        resp = await client.get("/tokens", headers={"SVC-API-KEY": tenant.key})
        problem = await resp.json()
    finally:
        release.set()
    assert resp.status == 503, problem
    assert problem["detail"] == STARTING


async def test_an_outage_before_ready_keeps_its_own_detail(starting, monkeypatch):
    """Neo4j down is not the service starting: that answer is not rewritten."""
    app = starting.server.app
    tenant = await new_tenant(app, "test")

    async def down(*args, **kwargs):
        raise Unavailable()

    monkeypatch.setattr(database(app), "_statement", down)
    resp = await starting.post("/tokens", json=CARD, headers={"SVC-API-KEY": tenant.key})
    problem = await resp.json()
    assert resp.status == 503, problem
    assert problem["detail"] != STARTING and "starting" not in problem["detail"]
