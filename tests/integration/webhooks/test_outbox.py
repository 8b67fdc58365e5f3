"""The outbox: each committed change writes its webhook event in its own transaction, and
nothing else does (a refused or rolled-back write leaves none); events carry ids, types,
containers and the actor, never data, masks, metadata values, fingerprints or indexes."""

from __future__ import annotations

import pytest
from factories import key_headers, make_application, without_ids

from vaultgraph.api.typedefs import services_key

from .conftest import CARD, make_token, make_webhook, outbox

# What a stored event may hold: nothing else (no data, mask, metadata, fingerprint, index).
EVENT_FIELDS = {"event_id", "type", "at", "tenant_id", "token_id", "token_type", "containers",
                "application_id", "parent_id", "child_id", "reason", "merged_into",
                "webhook_id", "state", "attempts", "next_at"}


async def test_each_change_writes_one_event_of_its_kind(client, tenant, admin_headers):
    hook = await make_webhook(client, admin_headers)
    parent = await make_token(client, admin_headers, metadata={"colour": "Red"},
                              search_indexes=["{{ data.number | last4 }}"])
    child = await make_token(client, admin_headers)
    assert (await client.post(f"/tokens/{parent['id']}/children/{child['id']}",
                              headers=admin_headers)).status == 201
    resp = await client.patch(f"/tokens/{parent['id']}", json={"metadata": {"size": "L"}},
                              headers={**admin_headers,
                                       "Content-Type": "application/merge-patch+json"})
    assert resp.status == 200, await resp.text()
    assert (await client.delete(f"/tokens/{parent['id']}/children/{child['id']}",
                                headers=admin_headers)).status == 204
    assert (await client.delete(f"/tokens/{child['id']}", headers=admin_headers)).status == 204

    events = await outbox(client, hook["id"])
    actor = tenant.application_id
    assert [(e["type"], e["token_id"]) for e in events] == [
        ("token.created", parent["id"]), ("token.created", child["id"]),
        ("token.linked", parent["id"]), ("token.updated", parent["id"]),
        ("token.unlinked", parent["id"]), ("token.deleted", child["id"])]
    assert all(e["application_id"] == actor and e["tenant_id"] == tenant.tenant_id
               and e["state"] == "pending" and e["attempts"] == 0 for e in events)
    assert len({e["event_id"] for e in events}) == len(events)
    linked, unlinked, deleted = events[2], events[4], events[5]
    assert (linked["parent_id"], linked["child_id"]) == (parent["id"], child["id"])
    assert (unlinked["parent_id"], unlinked["child_id"]) == (parent["id"], child["id"])
    assert (deleted["reason"], deleted.get("merged_into")) == ("request", None)
    assert events[0]["containers"] == parent["containers"]
    assert all(set(e) <= EVENT_FIELDS for e in events), [set(e) - EVENT_FIELDS for e in events]
    stored = without_ids(repr(events))
    assert CARD["number"] not in stored and "Red" not in stored and "4242" not in stored


async def test_a_tenant_without_webhooks_gets_no_events(client, tenant, admin_headers):
    await make_token(client, admin_headers)
    db = client.server.app[services_key].database
    records, _, _ = await db.driver.execute_query(
        "MATCH (d:WebhookDelivery {tenant_id: $t}) RETURN count(d) AS n",
        {"t": tenant.tenant_id}, database_=db.database)
    assert records[0]["n"] == 0


async def test_refused_and_rolled_back_writes_write_no_event(client, tenant, admin_headers):
    hook = await make_webhook(client, admin_headers)
    token = await make_token(client, admin_headers, id="taken-id")
    # A conflict (the id is taken: the statement fails on the constraint, rolled back).
    resp = await client.post("/tokens", json={"type": "card", "data": CARD, "id": "taken-id"},
                             headers=admin_headers)
    assert resp.status == 409
    # A refusal after the update's transaction began (the lock taken, then a 403 rolls back).
    reader = await make_application(client, admin_headers, permissions=["token:update"],
                                    rules=[{"container": "/", "transform": "mask",
                                            "permissions": ["token:read", "token:update"]}])
    resp = await client.patch(f"/tokens/{token['id']}", json={"mask": "{{ data.number }}"},
                              headers={**key_headers(reader),
                                       "Content-Type": "application/merge-patch+json"})
    assert resp.status == 403
    # Deleting what does not exist, a link to nothing.
    assert (await client.delete("/tokens/nothing-here", headers=admin_headers)).status == 404
    assert (await client.post(f"/tokens/{token['id']}/children/nothing-here",
                              headers=admin_headers)).status == 404
    # An existing link made again changes nothing.
    child = await make_token(client, admin_headers)
    for _ in range(2):
        await client.post(f"/tokens/{token['id']}/children/{child['id']}", headers=admin_headers)
    assert [e["type"] for e in await outbox(client, hook["id"])] == [
        "token.created", "token.created", "token.linked"]


async def test_a_webhook_gets_only_its_event_types_and_containers(client, tenant, admin_headers):
    deletes = await make_webhook(client, admin_headers, events=["token.deleted"])
    pci = await make_webhook(client, admin_headers, containers=["/pci/"])
    inside = await make_token(client, admin_headers, containers=["/pci/cards/"])
    outside = await make_token(client, admin_headers, containers=["/general/"])
    both = await make_token(client, admin_headers, containers=["/general/", "/pci/"])
    # A link is news for a webhook holding both ends only.
    await client.post(f"/tokens/{inside['id']}/children/{outside['id']}", headers=admin_headers)
    await client.post(f"/tokens/{inside['id']}/children/{both['id']}", headers=admin_headers)
    await client.delete(f"/tokens/{outside['id']}", headers=admin_headers)

    assert [(e["type"], e["token_id"]) for e in await outbox(client, deletes["id"])] == [
        ("token.deleted", outside["id"])]
    assert [(e["type"], e["token_id"], e.get("child_id"))
            for e in await outbox(client, pci["id"])] == [
        ("token.created", inside["id"], None), ("token.created", both["id"], None),
        ("token.linked", inside["id"], both["id"])]


async def test_a_disabled_webhook_gets_no_events_and_events_go_to_every_webhook(
        client, tenant, admin_headers):
    one = await make_webhook(client, admin_headers)
    two = await make_webhook(client, admin_headers)
    off = await make_webhook(client, admin_headers)
    resp = await client.patch(f"/webhooks/{off['id']}", json={"status": "disabled"},
                              headers={**admin_headers,
                                       "Content-Type": "application/merge-patch+json"})
    assert resp.status == 200
    await make_token(client, admin_headers)
    [a], [b] = await outbox(client, one["id"]), await outbox(client, two["id"])
    assert a["event_id"] == b["event_id"]  # one event, one delivery per webhook
    assert await outbox(client, off["id"]) == []


async def test_bulk_creates_and_dedup_merges_write_their_events(client, tenant, admin_headers):
    hook = await make_webhook(client, admin_headers)
    resp = await client.post("/tokenize", json=[
        {"type": "card", "data": CARD, "id": "bulk-a", "deduplicate_token": True},
        {"type": "card", "data": CARD, "id": "bulk-b", "deduplicate_token": True}],
        headers=admin_headers)
    assert resp.status in (200, 207), await resp.text()
    other = dict(CARD, number="5555555555554444")
    twin = await make_token(client, admin_headers, data=other, id="twin",
                            deduplicate_token=True)
    # The update makes `twin` a duplicate of bulk-a: it is merged into it and retired.
    resp = await client.patch("/tokens/twin", json={"data": {"number": CARD["number"]}},
                              headers={**admin_headers,
                                       "Content-Type": "application/merge-patch+json"})
    assert resp.status == 200, await resp.text()
    events = [(e["type"], e["token_id"], e.get("reason"), e.get("merged_into"))
              for e in await outbox(client, hook["id"])]
    assert events == [("token.created", "bulk-a", None, None),
                      ("token.created", twin["id"], None, None),
                      ("token.deleted", "twin", "deduplicated", "bulk-a")]


@pytest.mark.parametrize("via", ["sweep", "reused id"])
async def test_expired_tokens_retired_write_system_events(client, tenant, admin_headers, via):
    hook = await make_webhook(client, admin_headers)
    db = client.server.app[services_key].database
    await db.driver.execute_query(
        "CREATE (t:Token {tenant_id: $t, id: 'old', type: 'card', containers: ['/pci/'], "
        "data_ct: 'x', metadata: '{}', created_at: datetime() - duration('P1D'), "
        "created_by: 'test', expires_at: datetime() - duration('PT1S')})",
        {"t": tenant.tenant_id}, database_=db.database)
    if via == "sweep":
        await client.server.app[services_key].expiry.sweep()
        expected = [("token.deleted", "old", "expired", "system")]
    else:
        await make_token(client, admin_headers, id="old")
        expected = [("token.deleted", "old", "expired", "system"),
                    ("token.created", "old", None, tenant.application_id)]
    events = await outbox(client, hook["id"])  # one transaction: the same time
    assert sorted((e["type"], e["token_id"], e.get("reason"), e["application_id"])
                  for e in events) == sorted(expected)
    [deleted] = [e for e in events if e["type"] == "token.deleted"]
    assert deleted["containers"] == ["/pci/"]
