"""Managing webhooks: the secret shown once and stored encrypted, tenants kept apart, merge
patches, containers within the caller's reach, known event types only, paging, rotation."""

from __future__ import annotations

import base64
import uuid

import pytest
from factories import database, key_headers, make_application, new_tenant

from .conftest import make_webhook, outbox

PATCH = "application/merge-patch+json"


async def test_the_secret_is_shown_once_and_stored_encrypted(client, tenant, admin_headers):
    hook = await make_webhook(client, admin_headers, events=["token.created", "token.deleted"])
    secret = hook["secret"]
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert {k: hook[k] for k in ("url", "events", "containers", "status")} == {
        "url": "https://hooks.example.com/in", "events": ["token.created", "token.deleted"],
        "containers": ["/"], "status": "enabled"}
    got = await (await client.get(f"/webhooks/{hook['id']}", headers=admin_headers)).json()
    assert "secret" not in got and got["id"] == hook["id"]
    listed = await (await client.get("/webhooks", headers=admin_headers)).json()
    assert [w["id"] for w in listed["data"]] == [hook["id"]]
    assert "secret" not in listed["data"][0]
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(
        "MATCH (w:Webhook {id: $id}) RETURN properties(w) AS w", {"id": hook["id"]},
        database_=db.database)
    stored = repr(records[0]["w"])
    assert secret not in stored and secret.removeprefix("whsec_") not in stored
    assert records[0]["w"]["secret_ct"].startswith("v1.")


async def test_another_tenants_webhook_is_not_found(client, tenant, admin_headers):
    hook = await make_webhook(client, admin_headers)
    other = await new_tenant(client.server.app, "other")
    them = {"SVC-API-KEY": other.key}
    for method, path in [("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/secret"),
                         ("GET", "/deliveries"), ("POST", "/test")]:
        kwargs = {"json": {"description": "x"}} if method == "PATCH" else {}
        headers = {**them, "Content-Type": PATCH} if method == "PATCH" else them
        resp = await client.request(method, f"/webhooks/{hook['id']}{path}", headers=headers,
                                    **kwargs)
        unknown = await client.request(method, f"/webhooks/{uuid.uuid4()}{path}",
                                       headers=headers, **kwargs)
        assert resp.status == unknown.status == 404, (method, path)
        assert (await resp.json())["detail"] == (await unknown.json())["detail"]
    assert (await (await client.get("/webhooks", headers=them)).json())["data"] == []


async def test_unknown_events_and_refused_urls_are_400s(client, tenant, admin_headers):
    for body, field in [({"url": "https://a.example/", "events": ["token.eaten"]}, "events"),
                        ({"url": "https://a.example/", "events": []}, "events"),
                        ({"url": "https://a.example/"}, "events"),
                        ({"events": ["*"]}, "url"),
                        ({"url": "https://a.example/", "events": ["*"],
                          "containers": ["pci"]}, "containers")]:
        resp = await client.post("/webhooks", json=body, headers=admin_headers)
        answer = await resp.json()
        assert resp.status == 400, answer
        assert any(k.startswith(field) for k in answer["errors"]), (field, answer)


async def test_containers_must_lie_within_the_callers_readable_ones(client, tenant,
                                                                      admin_headers):
    app = await make_application(
        client, admin_headers, permissions=["webhook:create", "webhook:update", "webhook:read"],
        rules=[{"container": "/pci/", "transform": "mask", "permissions": ["token:read"]}])
    mine = key_headers(app)
    await make_webhook(client, mine, containers=["/"], status=403)
    await make_webhook(client, mine, containers=["/general/"], status=403)
    hook = await make_webhook(client, mine, containers=["/pci/cards/"])
    assert hook["containers"] == ["/pci/cards/"]
    resp = await client.patch(f"/webhooks/{hook['id']}", json={"containers": ["/"]},
                              headers={**mine, "Content-Type": PATCH})
    assert resp.status == 403
    # Without `webhook:create` there is no creating one at all.
    reader = await make_application(client, admin_headers, permissions=["webhook:read"])
    await make_webhook(client, key_headers(reader), status=403)


async def test_merge_patch_changes_only_what_it_names(client, tenant, admin_headers):
    hook = await make_webhook(client, admin_headers)
    headers = {**admin_headers, "Content-Type": PATCH}
    resp = await client.patch(f"/webhooks/{hook['id']}", headers=headers,
                              json={"description": "orders", "events": ["token.created"]})
    changed = await resp.json()
    assert resp.status == 200, changed
    assert (changed["description"], changed["events"], changed["url"]) == (
        "orders", ["token.created"], hook["url"])
    resp = await client.patch(f"/webhooks/{hook['id']}", headers=headers,
                              json={"description": None, "status": "disabled"})
    changed = await resp.json()
    assert (changed.get("description"), changed["status"]) == (None, "disabled")
    resp = await client.patch(f"/webhooks/{hook['id']}", headers=headers, json={"url": None})
    assert resp.status == 400


async def test_pages_of_webhooks_and_delete(client, tenant, admin_headers):
    ids = sorted([(await make_webhook(client, admin_headers))["id"] for _ in range(3)])
    first = await (await client.get("/webhooks?size=2", headers=admin_headers)).json()
    assert [w["id"] for w in first["data"]] == ids[:2]
    second = await (await client.get(
        f"/webhooks?size=2&start={first['pagination']['next']}", headers=admin_headers)).json()
    assert [w["id"] for w in second["data"]] == ids[2:]
    assert second["pagination"]["next"] is None
    assert (await client.delete(f"/webhooks/{ids[0]}", headers=admin_headers)).status == 204
    assert (await client.get(f"/webhooks/{ids[0]}", headers=admin_headers)).status == 404
    assert (await client.delete(f"/webhooks/{ids[0]}", headers=admin_headers)).status == 404
    assert (await client.get("/webhooks/not-a-uuid", headers=admin_headers)).status == 404


async def test_rotation_and_test_events(client, tenant, admin_headers):
    hook = await make_webhook(client, admin_headers)
    resp = await client.post(f"/webhooks/{hook['id']}/secret", headers=admin_headers)
    rotated = await resp.json()
    assert resp.status == 201, rotated
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != hook["secret"]
    resp = await client.post(f"/webhooks/{hook['id']}/test", headers=admin_headers)
    queued = await resp.json()
    assert resp.status == 201, queued
    [event] = await outbox(client, hook["id"])
    assert (event["type"], event["event_id"]) == ("webhook.test", queued["event_id"])
    listed = await (await client.get(f"/webhooks/{hook['id']}/deliveries",
                                     headers=admin_headers)).json()
    assert listed["data"] == []  # nothing attempted yet (no sender in these tests)


# -- a webhook outside the caller's reach ----------------------------------------------------
# An application acts on (reads, changes, rotates, tests, deletes, lists the deliveries of) only
# a webhook it could have created: every container of it within its `token:read` containers.
# Any other answers exactly like an unknown id (404, same body) and is left as it was.

NARROW = {"permissions": ["webhook:create", "webhook:read", "webhook:update", "webhook:delete"],
          "rules": [{"container": "/pci/", "transform": "mask", "permissions": ["token:read"]}]}
ACTIONS = [  # (method, path under /webhooks/{id}, body, success status)
    ("GET", "", None, 200),
    ("PATCH", "", {"url": "https://attacker.example/stolen"}, 200),
    ("POST", "/secret", None, 201),
    ("POST", "/test", None, 201),
    ("GET", "/deliveries", None, 200),
    ("DELETE", "", None, 204),
]


async def _act(client, headers, webhook_id, method, path, body):
    if method == "PATCH":
        headers = {**headers, "Content-Type": PATCH}
    resp = await client.request(method, f"/webhooks/{webhook_id}{path}", headers=headers,
                                json=body)
    return resp.status, (await resp.json() if resp.status != 204 else None)


async def _stored(client, webhook_id) -> dict | None:
    """The webhook as stored, secrets included, and how many deliveries it has."""
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(
        "OPTIONAL MATCH (w:Webhook {id: $id}) "
        "OPTIONAL MATCH (d:WebhookDelivery {webhook_id: $id}) "
        "RETURN properties(w) AS w, count(d) AS deliveries", {"id": webhook_id},
        database_=db.database)
    return {"webhook": records[0]["w"], "deliveries": records[0]["deliveries"]}


@pytest.mark.parametrize(("method", "path", "body", "ok"), ACTIONS,
                         ids=[f"{m} {p or '/'}" for m, p, _, _ in ACTIONS])
async def test_a_webhook_outside_the_callers_readable_containers_reads_as_unknown(
        client, tenant, admin_headers, method, path, body, ok):
    narrow = key_headers(await make_application(client, admin_headers, **NARROW))
    everywhere = await make_webhook(client, admin_headers, containers=["/"])
    partly = await make_webhook(client, admin_headers, containers=["/pci/", "/pii/high/"])
    within = await make_webhook(client, admin_headers, containers=["/pci/cards/"])

    status, unknown = await _act(client, narrow, uuid.uuid4(), method, path, body)
    assert status == 404
    for hook in (everywhere, partly):
        before = await _stored(client, hook["id"])
        status, answer = await _act(client, narrow, hook["id"], method, path, body)
        assert (status, answer["detail"]) == (404, unknown["detail"]), (hook["containers"],
                                                                         answer)
        assert await _stored(client, hook["id"]) == before

    # Within its containers it may, and the administrator may everywhere.
    assert (await _act(client, narrow, within["id"], method, path, body))[0] == ok
    for hook in (everywhere, partly):
        assert (await _act(client, admin_headers, hook["id"], method, path, body))[0] == ok


async def test_the_list_omits_webhooks_outside_the_callers_readable_containers(
        client, tenant, admin_headers):
    narrow = key_headers(await make_application(client, admin_headers, **NARROW))
    containers = [["/"], ["/pci/"], ["/pci/", "/pii/"], ["/pii/high/"], ["/pci/cards/"]]
    hooks = [await make_webhook(client, admin_headers, containers=c) for c in containers]
    mine = sorted(h["id"] for h in hooks if all(c.startswith("/pci/") for c in h["containers"]))
    seen, start = [], None
    while True:  # pages of one: the omitted ones never leave a page short or a cursor behind
        query = "?size=1" + (f"&start={start}" if start else "")
        page = await (await client.get(f"/webhooks{query}", headers=narrow)).json()
        seen += [w["id"] for w in page["data"]]
        start = page["pagination"]["next"]
        if start is None:
            break
    assert seen == mine
    everyone = await (await client.get("/webhooks", headers=admin_headers)).json()
    assert [w["id"] for w in everyone["data"]] == sorted(h["id"] for h in hooks)
    # Without `token:read` anywhere it could create none, and sees none.
    blind = await make_application(client, admin_headers, permissions=["webhook:read"])
    page = await (await client.get("/webhooks", headers=key_headers(blind))).json()
    assert page["data"] == []


async def test_a_patch_of_containers_is_checked_on_the_old_and_the_new(client, tenant,
                                                                        admin_headers):
    narrow = key_headers(await make_application(client, admin_headers, **NARROW))
    headers = {**narrow, "Content-Type": PATCH}
    # Old containers outside: narrowing them into the caller's reach is no way in.
    partly = await make_webhook(client, admin_headers, containers=["/pci/", "/pii/high/"])
    resp = await client.patch(f"/webhooks/{partly['id']}", headers=headers,
                              json={"containers": ["/pci/"]})
    assert resp.status == 404
    got = await (await client.get(f"/webhooks/{partly['id']}", headers=admin_headers)).json()
    assert got["containers"] == ["/pci/", "/pii/high/"]
    # New containers outside: refused as at creation.
    mine = await make_webhook(client, narrow, containers=["/pci/cards/"])
    resp = await client.patch(f"/webhooks/{mine['id']}", headers=headers,
                              json={"containers": ["/pci/", "/pii/"]})
    assert resp.status == 403
    assert (await resp.json())["detail"].startswith("The application may only subscribe")
    # Both within: changed.
    resp = await client.patch(f"/webhooks/{mine['id']}", headers=headers,
                              json={"containers": ["/pci/"]})
    assert resp.status == 200 and (await resp.json())["containers"] == ["/pci/"]
