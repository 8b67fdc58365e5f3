"""Fixtures for the webhook tests: the app without a background sender (tests that deliver
start one, or a `vaultgraph serve`, of their own), and helpers that read the outbox.

The expiry sweeper is global (every tenant): its background run is pushed an hour away and
tests sweep on demand."""

from __future__ import annotations

import dataclasses

import pytest
from factories import database

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
