"""A request that the database cannot answer in time while the service is still starting (before
`/ready` turns 200: on a freshly started Neo4j, its first plans take seconds each) is told so:
its 503 says the service is starting and names `/ready`, instead of blaming the database or the
audit trail. Once started, the same failure keeps its own detail."""

from __future__ import annotations

import asyncio

import pytest
from factories import database, new_tenant

from vaultgraph.api.typedefs import services_key
from vaultgraph.app import create_app

CARD = {"type": "card", "data": {"number": "4242424242424242"}}


@pytest.fixture
async def starting(aiohttp_client, settings):
    """An app whose background start-up never ran (its readiness says starting)."""
    return await aiohttp_client(create_app(settings, background_start=True,
                                           schema_applied=True))


def no_time_left(monkeypatch, app) -> None:
    """Every statement's deadline has passed when it is sent: each answers 503 at once."""
    db = database(app)
    monkeypatch.setattr(db, "_deadline",
                        lambda budgeted=True: asyncio.get_running_loop().time())


async def test_a_request_before_ready_is_told_the_service_is_starting(starting, monkeypatch):
    app = starting.server.app
    assert not app[services_key].readiness.started
    tenant = await new_tenant(app, "test")
    no_time_left(monkeypatch, app)
    resp = await starting.post("/tokens", json=CARD, headers={"SVC-API-KEY": tenant.key})
    problem = await resp.json()
    assert resp.status == 503, problem
    assert "starting" in problem["detail"] and "/ready" in problem["detail"]
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
