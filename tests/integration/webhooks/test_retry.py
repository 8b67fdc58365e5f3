"""Sending an event to a webhook again on request (`POST /webhooks/{id}/deliveries/{event_id}/
retry`): a delivery failed for good gets one more attempt, a delivered one is sent again with
the same id and bytes, a disabled webhook holds it, one being sent is a 409, and the webhook's
reach and tenant bound it like every other webhook call."""

from __future__ import annotations

import asyncio
import uuid

from factories import database, key_headers, make_application, new_tenant
from standardwebhooks.webhooks import Webhook

from vaultgraph.repository.webhooks import WebhookRepository

from .conftest import attempts_when, make_token, make_webhook, outbox, until

PATCH = "application/merge-patch+json"


def retry_path(webhook_id, event_id) -> str:
    return f"/webhooks/{webhook_id}/deliveries/{event_id}/retry"


async def retry(client, headers, webhook_id, event_id) -> tuple[int, dict]:
    resp = await client.post(retry_path(webhook_id, event_id), headers=headers)
    return resp.status, await resp.json()


async def settled(client, webhook_id, state: str, attempts: int) -> dict:
    """The webhook's one delivery once it is in `state` after `attempts` attempts."""
    for _ in range(600):
        [delivery] = await outbox(client, webhook_id)
        if (delivery["state"], delivery["attempts"], delivery.get("claim")) == (
                state, attempts, None):
            return delivery
        await asyncio.sleep(0.05)
    raise AssertionError(f"the delivery is not {state} after {attempts} attempts")


async def test_a_delivery_failed_for_good_gets_one_more_attempt(delivering, receiver):
    client = await delivering(webhook_retry_schedule="0.2")
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    receiver.answers = [(500, {}), (500, {}), (503, {})]
    await make_token(client, headers)
    failed = await settled(client, hook["id"], "failed", 2)

    status, answer = await retry(client, headers, hook["id"], failed["event_id"])
    assert (status, answer) == (202, {"event_id": failed["event_id"], "state": "pending"})
    await settled(client, hook["id"], "failed", 3)  # one attempt, refused again: failed again
    status, answer = await retry(client, headers, hook["id"], failed["event_id"])
    assert (status, answer["state"]) == (202, "pending")
    await settled(client, hook["id"], "delivered", 4)

    assert [sent["webhook-id"] for sent, _ in receiver.received] == [failed["event_id"]] * 4
    assert len({body for _, body in receiver.received}) == 1  # the same event each time
    found = await attempts_when(client, headers, hook["id"], 4)
    assert [(a["attempt"], a["status"]) for a in found] == [(4, 200), (3, 503), (2, 500),
                                                            (1, 500)]


async def test_a_delivered_event_is_sent_again_with_its_id(delivering, receiver):
    client = await delivering()
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    await make_token(client, headers)
    done = await settled(client, hook["id"], "delivered", 1)

    status, answer = await retry(client, headers, hook["id"], done["event_id"])
    assert (status, answer["state"]) == (202, "pending")
    await until(lambda: len(receiver.received) == 2, what="the event sent again")
    (first, body), (again, body_again) = receiver.received
    assert first["webhook-id"] == again["webhook-id"] == done["event_id"]
    assert body_again == body
    Webhook(hook["secret"]).verify(body_again, again)
    await settled(client, hook["id"], "delivered", 2)


async def test_a_disabled_webhook_holds_the_event_until_it_is_enabled(client, tenant,
                                                                      admin_headers):
    hook = await make_webhook(client, admin_headers)
    resp = await client.patch(f"/webhooks/{hook['id']}", json={"status": "disabled"},
                              headers={**admin_headers, "Content-Type": PATCH})
    assert resp.status == 200
    queued = await (await client.post(f"/webhooks/{hook['id']}/test",
                                      headers=admin_headers)).json()
    status, answer = await retry(client, admin_headers, hook["id"], queued["event_id"])
    assert (status, answer) == (202, {"event_id": queued["event_id"], "state": "paused"})
    [held] = await outbox(client, hook["id"])
    assert held["state"] == "paused"
    resp = await client.patch(f"/webhooks/{hook['id']}", json={"status": "enabled"},
                              headers={**admin_headers, "Content-Type": PATCH})
    assert resp.status == 200
    [due] = await outbox(client, hook["id"])
    assert due["state"] == "pending"


async def test_an_event_being_sent_is_a_409_and_left_as_it_is(delivering, receiver):
    client = await delivering()
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    receiver.hold = asyncio.Event()
    await make_token(client, headers)
    await until(lambda: receiver.holding == 1, what="an attempt under way")
    [sending] = await outbox(client, hook["id"])
    status, answer = await retry(client, headers, hook["id"], sending["event_id"])
    assert (status, answer["title"]) == (409, "Conflict"), answer
    assert answer["detail"].startswith("The event is being sent to this webhook now")
    [still] = await outbox(client, hook["id"])
    assert still == sending  # claim, lease and state untouched
    receiver.hold.set()
    await settled(client, hook["id"], "delivered", 1)
    assert len(receiver.received) == 1


async def test_unknown_events_webhooks_and_other_tenants(client, tenant, admin_headers):
    hook = await make_webhook(client, admin_headers)
    queued = await (await client.post(f"/webhooks/{hook['id']}/test",
                                      headers=admin_headers)).json()
    status, no_delivery = await retry(client, admin_headers, hook["id"], uuid.uuid4())
    assert (status, no_delivery["detail"]) == (404, "The webhook has no delivery of this event "
                                                    "(a delivered event is kept an hour, a "
                                                    "failed one as long as its attempts are "
                                                    "listed).")
    status, malformed = await retry(client, admin_headers, hook["id"], "not-an-id")
    assert (status, malformed["detail"]) == (404, no_delivery["detail"])
    status, no_webhook = await retry(client, admin_headers, uuid.uuid4(), queued["event_id"])
    assert (status, no_webhook["detail"]) == (404, "No webhook with this id.")

    other = await new_tenant(client.server.app, "other")
    other_headers = {"SVC-API-KEY": other.key}
    before = await outbox(client, hook["id"])
    status, answer = await retry(client, other_headers, hook["id"], queued["event_id"])
    assert (status, answer["detail"]) == (404, no_webhook["detail"])
    assert await outbox(client, hook["id"]) == before


async def test_the_webhooks_reach_and_its_permission_bound_a_retry(client, tenant,
                                                                   admin_headers):
    narrow = key_headers(await make_application(client, admin_headers, permissions=[
        "webhook:read", "webhook:update"], rules=[
        {"container": "/pci/", "transform": "mask", "permissions": ["token:read"]}]))
    reader = key_headers(await make_application(client, admin_headers, permissions=[
        "webhook:read"], rules=[
        {"container": "/", "transform": "mask", "permissions": ["token:read"]}]))
    everywhere = await make_webhook(client, admin_headers, containers=["/"])
    within = await make_webhook(client, admin_headers, containers=["/pci/cards/"])
    events = {}
    for hook in (everywhere, within):
        resp = await client.post(f"/webhooks/{hook['id']}/test", headers=admin_headers)
        events[hook["id"]] = (await resp.json())["event_id"]

    status, unknown = await retry(client, narrow, uuid.uuid4(), uuid.uuid4())
    status_outside, outside = await retry(client, narrow, everywhere["id"],
                                          events[everywhere["id"]])
    assert (status_outside, outside["detail"]) == (status, unknown["detail"]) == (
        404, "No webhook with this id.")
    assert (await retry(client, narrow, within["id"], events[within["id"]]))[0] == 202
    assert (await retry(client, reader, within["id"], events[within["id"]]))[0] == 403
    assert (await retry(client, admin_headers, everywhere["id"],
                        events[everywhere["id"]]))[0] == 202


async def blocked_on_a_lock(db, marker: str) -> None:
    """Returns once a transaction running a statement that holds `marker` is blocked on a lock
    (`SHOW TRANSACTIONS`); fails after 30 s."""
    for _ in range(600):
        records, _, _ = await db.driver.execute_query(
            "SHOW TRANSACTIONS YIELD status, currentQuery "
            "WHERE status STARTS WITH 'Blocked' AND currentQuery CONTAINS $marker "
            "RETURN count(*) AS blocked", {"marker": marker}, database_=db.database)
        if records[0]["blocked"]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no transaction was blocked on a lock")


async def test_a_retry_committed_while_the_prune_runs_keeps_its_delivery(client, tenant):
    """The prune reads the deliveries it deletes before it deletes them, in inner transactions:
    a delivery sent again between the two (here: a retry that commits while the prune waits on
    its lock) is pending again, not old, and stays."""
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers)
    await make_token(client, headers)
    [delivery] = await outbox(client, hook["id"])
    db = database(client.server.app)
    where = {"w": hook["id"], "e": delivery["event_id"]}
    await db.driver.execute_query(  # failed for good a month ago: the prune's to delete
        "MATCH (d:WebhookDelivery {webhook_id: $w, event_id: $e}) "
        "SET d.state = 'failed', d.next_at = datetime() - duration('P30D')",
        where, database_=db.database)

    repo = WebhookRepository(db)
    async with db.driver.session(database=db.database) as session:
        tx = await session.begin_transaction()
        # What a retry sets, held uncommitted: the prune reads the committed "failed".
        await tx.run("MATCH (d:WebhookDelivery {webhook_id: $w, event_id: $e}) "
                     "SET d.state = 'pending', d.next_at = datetime()", where)
        prune = asyncio.create_task(repo.prune(retention=86_400.0))
        await blocked_on_a_lock(db, "WebhookAttempt")  # the prune read it, waits on the lock
        assert not prune.done()
        await tx.commit()
    await prune
    [kept] = await outbox(client, hook["id"])
    assert kept["state"] == "pending"


async def test_the_prune_counts_what_it_deleted(client, tenant):
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers)
    await make_token(client, headers)
    await make_token(client, headers)
    first, second = await outbox(client, hook["id"])
    db = database(client.server.app)
    await db.driver.execute_query(
        "MATCH (d:WebhookDelivery {webhook_id: $w, event_id: $e}) "
        "SET d.state = 'failed', d.next_at = datetime() - duration('P30D')",
        {"w": hook["id"], "e": first["event_id"]}, database_=db.database)
    assert await WebhookRepository(db).prune(retention=86_400.0) == 1
    assert [d["event_id"] for d in await outbox(client, hook["id"])] == [second["event_id"]]
