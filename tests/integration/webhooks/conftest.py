"""Fixtures for the webhook tests: the app without a background sender (tests that deliver
start one, or a `vaultgraph serve`, of their own), and helpers that read the outbox.

The expiry sweeper is global (every tenant): its background run is pushed an hour away and
tests sweep on demand."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from aiohttp import web
from factories import database, new_tenant

from vaultgraph.app import create_app

CARD = {"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030,
        "cvc": "123"}


@pytest.fixture(scope="session")
def settings(settings):
    return dataclasses.replace(settings, expiry_sweep_interval=3600.0, webhook_poll_interval=0.0)


async def make_webhook(client, headers, *, url: str = "https://hooks.example.com/in",
                       events=("*",), containers=None, status: int = 201) -> dict:
    body: dict = {"url": url, "events": list(events)}
    if containers is not None:
        body["containers"] = containers
    resp = await client.post("/webhooks", json=body, headers=headers)
    answer = await resp.json()
    assert resp.status == status, answer
    return answer


async def outbox(client, webhook_id: str) -> list[dict]:
    """Every delivery the outbox holds for a webhook, oldest first (stored properties)."""
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(
        "MATCH (d:WebhookDelivery {webhook_id: $id}) RETURN properties(d) AS d "
        "ORDER BY d.at, d.type", {"id": webhook_id}, database_=db.database)
    return [dict(r["d"]) for r in records]


async def make_token(client, headers, **fields) -> dict:
    body = {"type": "card", "data": CARD, **fields}
    resp = await client.post("/tokens", json=body, headers=headers)
    answer = await resp.json()
    assert resp.status in (200, 201), answer
    return answer


# -- delivery: a real receiver on 127.0.0.1 and apps whose sender delivers ----------------

LOOPBACK = {"webhook_allow_http": True, "webhook_allowed_networks": "127.0.0.0/8",
            "webhook_poll_interval": 0.05, "webhook_retry_schedule": "0.2,0.2,0.2",
            "webhook_timeout": 5.0, "webhook_lease": 10.0}


class Receiver:
    """An endpoint that records what it receives; `answers` (status, headers) are given in
    turn (then 200); `hold` keeps requests open until set."""

    def __init__(self):
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.answers: list[tuple[int, dict]] = []
        self.hold: asyncio.Event | None = None
        self.holding = 0  # requests held so far
        self.open = 0  # requests being answered now
        self.most_open = 0
        self.open_ids: set[str] = set()
        self.overlaps: list[str] = []
        self.redirected = 0
        self.arrived: list[str] = []  # every request's webhook-id, as it arrives

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        msg_id = request.headers.get("webhook-id", "")
        self.arrived.append(msg_id)
        if msg_id in self.open_ids:
            self.overlaps.append(msg_id)
        self.open_ids.add(msg_id)
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            if self.hold is not None:
                self.holding += 1
                await self.hold.wait()
            else:
                await asyncio.sleep(0.02)
            self.received.append(({k.lower(): v for k, v in request.headers.items()}, body))
            status, headers = self.answers.pop(0) if self.answers else (200, {})
            return web.Response(status=status, headers=headers, text="ok" * 1000)
        finally:
            self.open -= 1
            self.open_ids.discard(msg_id)

    async def elsewhere(self, request: web.Request) -> web.Response:
        self.redirected += 1
        return web.Response(text="followed")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        app.router.add_post("/elsewhere", self.elsewhere)
        return app


async def until(condition, within: float = 60.0, what: str = "condition"):
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while not condition():
        if loop.time() > end:
            raise AssertionError(f"{what} not met within {within}s")
        await asyncio.sleep(0.02)


@pytest.fixture
async def receiver(aiohttp_server):
    rec = Receiver()
    server = await aiohttp_server(rec.app(), host="127.0.0.1")
    rec.url = f"http://127.0.0.1:{server.port}/hook"
    return rec


@pytest.fixture
def delivering(settings, aiohttp_client):
    """`await delivering(**settings)` → a test client of an app whose sender delivers."""
    async def make(**overrides):
        app = create_app(dataclasses.replace(settings, **{**LOOPBACK, **overrides}),
                         schema_applied=True)
        return await aiohttp_client(app)
    return make


async def backlog(delivering, receiver, count: int):
    """`count` events for a webhook to `receiver`, waiting in the outbox: written by an app
    that sends none. (its test client, the webhook)"""
    client = await delivering(webhook_poll_interval=0.0)
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    for _ in range(count):
        await make_token(client, headers)
    return client, hook


async def delivered_once(client, webhook_id: str, count: int) -> bool:
    """Whether the webhook's `count` deliveries are each delivered at their first attempt
    (waiting up to 30 s for the outcomes to be recorded)."""
    for _ in range(600):
        states = [(d["state"], d["attempts"]) for d in await outbox(client, webhook_id)]
        if states == [("delivered", 1)] * count:
            return True
        await asyncio.sleep(0.05)
    return False


async def attempts(client, headers, webhook_id) -> list[dict]:
    resp = await client.get(f"/webhooks/{webhook_id}/deliveries", headers=headers)
    assert resp.status == 200
    return (await resp.json())["data"]


async def attempts_when(client, headers, webhook_id, count):
    for _ in range(1200):
        found = await attempts(client, headers, webhook_id)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} attempts recorded")
