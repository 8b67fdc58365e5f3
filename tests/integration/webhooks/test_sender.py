"""The sender's round trips: a claim takes a batch of due deliveries under one lease, the
outcomes of attempts are recorded together (each webhook's run of failures read in the order
the attempts ended), a delivery paused meanwhile stays paused, and a stopping sender gives
back the claims it has not started."""

from __future__ import annotations

import asyncio

import orjson
from factories import database, new_tenant

from vaultgraph.api.typedefs import services_key
from vaultgraph.repository.webhooks import WebhookRepository

from .conftest import (
    attempts,
    attempts_when,
    backlog,
    delivered_once,
    make_token,
    make_webhook,
    outbox,
    until,
)

PATCH = "application/merge-patch+json"


def outcome(event: dict, claim: str, *, success: bool, retry_in: float | None = 60.0) -> dict:
    return {"webhook_id": event["webhook_id"], "event_id": event["event_id"], "claim": claim,
            "success": success, "outcome": "success" if success else "status",
            "status": 200 if success else 500, "error": None, "duration_ms": 1.0,
            "response": "", "retry_in": None if success else retry_in}


async def hold_claims(client, webhook_id: str, claim: str) -> list[dict]:
    """The webhook's deliveries, claimed by `claim` as a sender's claim leaves them."""
    db = database(client.server.app)
    await db.driver.execute_query(
        "MATCH (d:WebhookDelivery {webhook_id: $id}) SET d.claim = $claim, "
        "d.next_at = datetime() + duration('PT1M'), d.not_before = d.next_at",
        {"id": webhook_id, "claim": claim}, database_=db.database)
    return await outbox(client, webhook_id)


async def healthy_then_held(client, receiver, more: int) -> tuple[dict, dict]:
    """A webhook to `receiver` whose first event was delivered (the endpoint is healthy); then
    the receiver holds what comes and `more` events are written, the first of them held
    under way. (headers, webhook)"""
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    await make_token(client, headers)
    await attempts_when(client, headers, hook["id"], 1)
    receiver.hold = asyncio.Event()
    for _ in range(more):
        await make_token(client, headers)
    await until(lambda: receiver.holding == 1, what="the first of them under way")
    return headers, hook


async def claimed_when(client, webhook_id: str, count: int) -> int:
    """How many of the webhook's pending deliveries are claimed, once `count` are (or after
    12 s, however many)."""
    claimed = 0
    for _ in range(600):
        claimed = sum(1 for d in await outbox(client, webhook_id)
                      if d.get("claim") and d["state"] == "pending")
        if claimed == count:
            break
        await asyncio.sleep(0.02)
    return claimed


async def failing_since(client, webhook_id: str):
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(
        "MATCH (w:Webhook {id: $id}) RETURN w.failing_since AS since, w.status AS status",
        {"id": webhook_id}, database_=db.database)
    return records[0]["since"], records[0]["status"]


async def test_one_statement_records_a_batch_in_the_order_attempts_ended(
        client, tenant, admin_headers):
    repo = WebhookRepository(database(client.server.app))
    mended = await make_webhook(client, admin_headers, containers=["/a/"])
    broken = await make_webhook(client, admin_headers, containers=["/b/"])
    for containers in (["/a/"], ["/a/"], ["/b/"], ["/b/"], ["/b/"]):
        await make_token(client, admin_headers, containers=containers)
    a1, a2 = await hold_claims(client, mended["id"], "claim-1")
    b1, b2, b3 = await hold_claims(client, broken["id"], "claim-1")

    disabled = await repo.complete([
        outcome(a1, "claim-1", success=False), outcome(b1, "claim-1", success=True),
        outcome(a2, "claim-1", success=True), outcome(b2, "claim-1", success=False),
        outcome(b3, "another-claim", success=True),  # a lapsed claim: recorded by nobody
    ], disable_after=3600)
    assert disabled == []
    # Failed then succeeded: no run of failures. Succeeded then failed: a run under way.
    assert await failing_since(client, mended["id"]) == (None, "enabled")
    since, status = await failing_since(client, broken["id"])
    assert since is not None and status == "enabled"
    states = {d["event_id"]: (d["state"], d["attempts"], d.get("claim"))
              for d in [*await outbox(client, mended["id"]), *await outbox(client, broken["id"])]}
    assert states == {a1["event_id"]: ("pending", 1, None), a2["event_id"]: ("delivered", 1, None),
                      b1["event_id"]: ("delivered", 1, None), b2["event_id"]: ("pending", 1, None),
                      b3["event_id"]: ("pending", 0, "claim-1")}
    listed = await attempts(client, admin_headers, broken["id"])
    assert sorted((a["event_id"], a["outcome"]) for a in listed) == sorted(
        [(b1["event_id"], "success"), (b2["event_id"], "status")])

    # A webhook failing every delivery for longer than allowed is disabled by the statement
    # that records the failure; its pending deliveries are paused.
    await hold_claims(client, broken["id"], "claim-2")
    assert await repo.complete([outcome(b2, "claim-2", success=False)],
                               disable_after=0) == [broken["id"]]
    assert (await failing_since(client, broken["id"]))[1] == "disabled"
    left = {d["event_id"]: d["state"] for d in await outbox(client, broken["id"])}
    assert left == {b1["event_id"]: "delivered", b2["event_id"]: "paused",
                    b3["event_id"]: "paused"}


async def test_a_delivery_paused_during_its_failing_attempt_stays_paused(delivering, receiver):
    client = await delivering()
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    receiver.hold = asyncio.Event()
    receiver.answers = [(500, {})]
    await make_token(client, headers)
    await until(lambda: receiver.holding == 1, what="the attempt under way")
    resp = await client.patch(f"/webhooks/{hook['id']}", json={"status": "disabled"},
                              headers={**headers, "Content-Type": PATCH})
    assert resp.status == 200, await resp.text()
    receiver.hold.set()  # the endpoint answers 500 after the webhook was disabled
    [recorded] = await attempts_when(client, headers, hook["id"], 1)
    assert (recorded["outcome"], recorded["status"]) == ("status", 500)
    [delivery] = await outbox(client, hook["id"])
    assert (delivery["state"], delivery["attempts"], delivery.get("claim")) == ("paused", 1, None)


async def test_a_stopping_sender_gives_back_the_claims_it_has_not_started(
        delivering, receiver):
    # One lane; an attempt may take 20 s and a lease lasts 200 s, so a healthy endpoint's
    # claims take up to 9 deliveries: one is sent, the others wait for the lane.
    client = await delivering(webhook_endpoint_concurrency=1, webhook_timeout=20.0,
                              webhook_lease=200.0)
    _, hook = await healthy_then_held(client, receiver, 3)
    # All three in this sender's hands, one of them being sent.
    assert await claimed_when(client, hook["id"], 3) == 3
    assert receiver.holding == 1
    await client.server.app[services_key].webhook_sender.stop(grace=0.2)
    pending = [d for d in await outbox(client, hook["id"]) if d["state"] == "pending"]
    # The one cut off keeps its claim until its lease lapses; the two never started are due.
    assert sorted(bool(d.get("claim")) for d in pending) == [False, False, True]
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(
        "MATCH (d:WebhookDelivery {webhook_id: $id}) WHERE d.claim IS NULL AND "
        "d.state = 'pending' AND d.next_at <= datetime() AND d.not_before <= datetime() "
        "RETURN count(d) AS due", {"id": hook["id"]}, database_=db.database)
    assert records[0]["due"] == 2
    receiver.hold.set()


async def test_a_fast_endpoints_claims_take_more_than_a_timeout_allows(delivering, receiver):
    # One lane; an attempt may take 30 s and a lease lasts 59 s: were every attempt to take
    # the whole timeout, a claim could take only what the lane starts at once. An endpoint
    # answering within 1.75 s (28 s to start them in, over 4 x 4) is paced by its answers:
    # with the lane busy, a claim takes every due delivery (the old share, one, would have
    # left three unclaimed).
    client = await delivering(webhook_endpoint_concurrency=1, webhook_timeout=30.0,
                              webhook_lease=59.0)
    _, hook = await healthy_then_held(client, receiver, 4)
    # All four in this sender's hands, one of them being sent.
    assert await claimed_when(client, hook["id"], 4) == 4
    assert (receiver.holding, receiver.most_open) == (1, 1)  # and one lane: one at a time
    receiver.hold.set()
    await until(lambda: len(receiver.received) == 5, what="the four, one after another")
    assert receiver.most_open == 1


async def test_a_backlog_drains_claim_after_claim_without_waiting_for_the_poll(
        delivering, receiver):
    # The events wait in the outbox; then a sender that looks once an hour on its own starts
    # on them, holding 8 at most (a claim takes 4 of a webhook at most): after its first
    # claim, each next one comes once half of its share is sent, so 60 take many claims.
    # Attempts end while a claim is under way: what the claim took, not what the sender holds
    # when it comes back, says whether more may be due.
    writer, hook = await backlog(delivering, receiver, 60)
    await delivering(webhook_poll_interval=3600.0, webhook_endpoint_concurrency=2,
                     webhook_max_in_flight=8)
    await until(lambda: len(receiver.received) == 60, what="every event, without a poll")
    assert len({sent["webhook-id"] for sent, _ in receiver.received}) == 60
    assert receiver.most_open <= 2
    # Each recorded once, delivered at its first attempt.
    assert await delivered_once(writer, hook["id"], 60)


async def test_a_commit_wakes_the_sender_without_waiting_for_the_poll(delivering, receiver):
    # The sender looks for due deliveries once an hour on its own: only the wake after each
    # committed change (for a tenant with a webhook changed or delivered to here) sends them.
    client = await delivering(webhook_poll_interval=3600.0)
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    await make_webhook(client, headers, url=receiver.url)
    first = await make_token(client, headers)
    await until(lambda: len(receiver.received) == 1, what="the first event")
    second = await make_token(client, headers, containers=["/later/"])
    await until(lambda: len(receiver.received) == 2, what="the second event")
    # An update commits in a transaction of several statements: it wakes the sender too.
    resp = await client.patch(f"/tokens/{first['id']}", json={"metadata": {"size": "L"}},
                              headers={**headers, "Content-Type": PATCH})
    assert resp.status == 200, await resp.text()
    await until(lambda: len(receiver.received) == 3, what="the update's event")
    assert [(orjson.loads(body)["type"], orjson.loads(body)["data"]["id"])
            for _, body in receiver.received] == [
        ("token.created", first["id"]), ("token.created", second["id"]),
        ("token.updated", first["id"])]
