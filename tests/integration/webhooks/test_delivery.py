"""Delivery from the outbox to a real HTTP receiver on 127.0.0.1 (the tests allow http and
loopback, which the service refuses by default): signed as Standard Webhooks say (checked with
the `standardwebhooks` package), retried with the same `webhook-id`, redirects not followed,
refused destinations, a hanging endpoint that holds back no other, and two senders that never
send one event at once."""

from __future__ import annotations

import asyncio

import orjson
from factories import new_tenant, without_ids
from standardwebhooks.webhooks import Webhook

from .conftest import (
    Receiver,
    attempts_when,
    backlog,
    delivered_once,
    make_token,
    make_webhook,
    outbox,
    until,
)


async def test_an_event_arrives_signed_and_is_recorded(delivering, receiver):
    client = await delivering()
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    token = await make_token(client, headers, containers=["/pci/"])
    await until(lambda: receiver.received, what="a delivery")
    [(sent, body)] = receiver.received
    event = Webhook(hook["secret"]).verify(body, sent)  # raises unless the signature holds
    assert set(event) == {"id", "type", "timestamp", "tenant_id", "data"}
    assert (event["type"], event["tenant_id"], event["id"]) == (
        "token.created", tenant.tenant_id, sent["webhook-id"])
    assert event["data"] == {"id": token["id"], "type": "card", "containers": ["/pci/"],
                             "application_id": tenant.application_id}
    assert "4242" not in without_ids(body)
    recorded = await attempts_when(client, headers, hook["id"], 1)
    [attempt] = recorded
    assert (attempt["event_id"], attempt["attempt"], attempt["outcome"], attempt["status"],
            attempt["next_at"]) == (event["id"], 1, "success", 200, None)
    assert len(attempt["response"].encode()) == 1024  # the answer's first kilobyte only
    [done] = await outbox(client, hook["id"])  # delivered: nothing left to send
    assert (done["state"], done["attempts"]) == ("delivered", 1)


async def test_a_failed_attempt_is_retried_with_the_same_id(delivering, receiver):
    client = await delivering()
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    receiver.answers = [(500, {}), (302, {"Location": "/elsewhere"})]
    await make_token(client, headers)
    await until(lambda: len(receiver.received) == 3, what="three attempts")
    ids = {sent["webhook-id"] for sent, _ in receiver.received}
    assert len(ids) == 1
    for sent, body in receiver.received:
        Webhook(hook["secret"]).verify(body, sent)
    assert len({body for _, body in receiver.received}) == 1  # the same bytes every time
    assert receiver.redirected == 0  # a redirect is a failure, never followed
    found = await attempts_when(client, headers, hook["id"], 3)
    assert [(a["attempt"], a["outcome"], a["status"]) for a in found] == [
        (3, "success", 200), (2, "redirect", 302), (1, "status", 500)]
    assert found[0]["next_at"] is None and found[1]["next_at"] and found[2]["next_at"]


async def test_an_endpoint_failing_every_delivery_is_disabled(delivering, receiver):
    client = await delivering(webhook_retry_schedule="0.3", webhook_disable_after=0.2)
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    receiver.answers = [(503, {})] * 10
    await make_token(client, headers)
    found = await attempts_when(client, headers, hook["id"], 2)
    assert [(a["attempt"], a["outcome"], a["next_at"]) for a in found] == [
        (2, "status", None), (1, "status", found[1]["next_at"])]
    got = await (await client.get(f"/webhooks/{hook['id']}", headers=headers)).json()
    assert (got["status"], got["disabled_reason"]) == ("disabled", "failing")
    [failed] = await outbox(client, hook["id"])
    assert (failed["state"], failed["attempts"]) == ("failed", 2)


async def test_destinations_the_policy_refuses(delivering, settings, receiver):
    client = await delivering(webhook_allowed_networks="")
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    for url in ("http://169.254.169.254/latest/meta-data", "http://10.0.0.7/hook",
                "http://127.0.0.1:9/hook", "http://[::1]/hook", "ftp://hooks.example.com/"):
        resp = await client.post("/webhooks", json={"url": url, "events": ["*"]},
                                 headers=headers)
        assert resp.status == 400, url
        assert "url" in (await resp.json())["errors"]
    # A host name is checked when it is resolved, at delivery: localhost is loopback.
    port = receiver.url.rsplit(":", 1)[1]
    hook = await make_webhook(client, headers, url=f"http://localhost:{port}")
    await make_token(client, headers)
    found = await attempts_when(client, headers, hook["id"], 1)
    assert (found[0]["outcome"], found[0]["status"]) == ("refused", None)
    assert receiver.received == []


async def test_a_rotated_secret_signs_beside_the_old_one(delivering, receiver):
    client = await delivering()
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    hook = await make_webhook(client, headers, url=receiver.url)
    rotated = await (await client.post(f"/webhooks/{hook['id']}/secret",
                                       headers=headers)).json()
    resp = await client.post(f"/webhooks/{hook['id']}/test", headers=headers)
    event_id = (await resp.json())["event_id"]
    await until(lambda: receiver.received, what="the test event")
    [(sent, body)] = receiver.received
    assert sent["webhook-id"] == event_id
    assert len(sent["webhook-signature"].split(" ")) == 2
    for secret in (hook["secret"], rotated["secret"]):
        assert Webhook(secret).verify(body, sent)["type"] == "webhook.test"


async def test_a_hanging_endpoint_holds_back_no_other(delivering, aiohttp_server):
    # Attempts never time out here: a held request stays held until the test lets it go.
    client = await delivering(webhook_endpoint_concurrency=2, webhook_timeout=120.0,
                              webhook_lease=130.0)
    tenant = await new_tenant(client.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    slow, fast = Receiver(), Receiver()
    slow.hold = asyncio.Event()
    slow_server = await aiohttp_server(slow.app(), host="127.0.0.1")
    fast_server = await aiohttp_server(fast.app(), host="127.0.0.1")
    await make_webhook(client, headers, url=f"http://127.0.0.1:{slow_server.port}/hook",
                       containers=["/slow/"])
    await make_webhook(client, headers, url=f"http://127.0.0.1:{fast_server.port}/hook",
                       containers=["/fast/"])
    for _ in range(5):
        await make_token(client, headers, containers=["/slow/"])
    await until(lambda: slow.holding == 2, what="the slow endpoint's two requests")
    for _ in range(3):
        await make_token(client, headers, containers=["/fast/"])
    await until(lambda: len(fast.received) == 3, what="the fast endpoint's deliveries")
    # Still hanging, and never more than two of its deliveries in flight at once.
    assert (slow.holding, slow.most_open, slow.received) == (2, 2, [])
    slow.hold.set()
    await until(lambda: len(slow.received) == 5, what="the slow endpoint's deliveries")


async def test_two_senders_never_send_one_event_at_once(delivering, receiver):
    one = await delivering()
    two = await delivering()
    tenant = await new_tenant(one.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    await make_webhook(one, headers, url=receiver.url)
    for i in range(30):
        await make_token(one if i % 2 else two, headers)
    await until(lambda: len(receiver.received) >= 30, what="30 deliveries")
    await asyncio.sleep(0)  # nothing more is due: every event was delivered once
    ids = [sent["webhook-id"] for sent, _ in receiver.received]
    assert len(ids) == len(set(ids)) == 30
    assert receiver.overlaps == []
    assert all(orjson.loads(body)["type"] == "token.created" for _, body in receiver.received)


async def test_two_senders_share_a_backlog_each_event_sent_once(delivering, receiver):
    # The events wait in the outbox (this app sends none), then two senders start on them at
    # once: their batch claims race for the same deliveries, and each is sent by one.
    client, hook = await backlog(delivering, receiver, 40)
    await asyncio.gather(delivering(webhook_endpoint_concurrency=3),
                         delivering(webhook_endpoint_concurrency=3))
    await until(lambda: len(receiver.received) >= 40, what="40 deliveries")
    ids = [sent["webhook-id"] for sent, _ in receiver.received]
    assert len(ids) == len(set(ids)) == 40
    assert receiver.overlaps == []
    # Recorded once each, by the sender that sent it.
    assert await delivered_once(client, hook["id"], 40)
