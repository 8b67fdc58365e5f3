"""Linking and unlinking tokens (POST and DELETE /tokens/{parent}/children/{child}), and what
deletion does to links."""

from __future__ import annotations

import asyncio

from ._support import PROBLEM_JSON, bank, card, customer, cypher, expire, links_between
from .conftest import READ, rule


async def test_link_is_created_with_201_and_the_link(api, tenant):
    parent = await api.create(customer())
    child = await api.create(card())
    body = await api.link(parent["id"], child["id"], 201)
    assert body["parent_id"] == parent["id"] and body["child_id"] == child["id"]
    assert body["created_at"].endswith(("Z", "+00:00"))
    assert await links_between(api.client, tenant.tenant_id, parent["id"], child["id"]) == 1


async def test_linking_again_is_a_204_and_leaves_one_edge(api, tenant):
    parent, child = await api.create(customer()), await api.create(card())
    await api.link(parent["id"], child["id"], 201)
    assert await api.link(parent["id"], child["id"], 204) is None
    assert await links_between(api.client, tenant.tenant_id, parent["id"], child["id"]) == 1


async def test_concurrent_identical_links_make_exactly_one_edge(api, tenant):
    parent, child = await api.create(customer()), await api.create(card())
    responses = await asyncio.gather(*(
        api.client.post(f"/tokens/{parent['id']}/children/{child['id']}", headers=api.headers)
        for _ in range(20)))
    statuses = sorted(r.status for r in responses)
    assert statuses == [201] + [204] * 19
    assert await links_between(api.client, tenant.tenant_id, parent["id"], child["id"]) == 1


async def test_concurrent_opposite_links_both_succeed(api, tenant):
    a, b = await api.create(customer()), await api.create(card())
    for attempt in range(5):
        ab, ba = await asyncio.gather(
            api.client.post(f"/tokens/{a['id']}/children/{b['id']}", headers=api.headers),
            api.client.post(f"/tokens/{b['id']}/children/{a['id']}", headers=api.headers))
        # Each direction is a link of its own: both new the first time, both there after.
        assert (ab.status, ba.status) == ((201, 201) if attempt == 0 else (204, 204))
    assert await links_between(api.client, tenant.tenant_id, a["id"], b["id"]) == 1
    assert await links_between(api.client, tenant.tenant_id, b["id"], a["id"]) == 1


async def test_a_two_way_link_is_two_links(api):
    a, b = await api.create(customer()), await api.create(customer("Bob"))
    await api.link(a["id"], b["id"], 201)
    await api.link(b["id"], a["id"], 201)
    assert [t["id"] for t in (await api.children(a["id"]))["data"]] == [b["id"]]
    assert [t["id"] for t in (await api.children(b["id"]))["data"]] == [a["id"]]


async def test_a_token_cannot_be_its_own_child(api):
    token = await api.create(customer())
    problem = await api.link(token["id"], token["id"], 400)
    assert problem["status"] == 400
    await api.unlink(token["id"], token["id"], 400)


async def test_unknown_expired_and_foreign_ends_all_answer_like_an_unknown_token(
        api, tenant, other_tenant):
    parent = await api.create(customer())
    expired = await api.create(card())
    await expire(api.client, tenant.tenant_id, expired["id"])
    foreign = await other_tenant.create(card())
    unknown = await api.get("no-such-token", 404)
    for child_id in ("no-such-token", expired["id"], foreign["id"]):
        assert await api.link(parent["id"], child_id, 404) == unknown
        assert await api.link(child_id, parent["id"], 404) == unknown
        assert await api.unlink(parent["id"], child_id, 404) == unknown


async def test_linking_needs_read_on_both_tokens(api, caller, tenant):
    card_token = await api.create(card())  # /pci/high/
    bank_token = await api.create(bank())  # /bank/high/
    pci_reader = await caller(rule("/pci/", "mask", READ), permissions=READ)
    both_reader = await caller(rule("/pci/", "mask", READ), rule("/bank/", "redact", READ),
                               permissions=READ)
    unknown = await api.get("no-such-token", 404)
    assert await pci_reader.link(card_token["id"], bank_token["id"], 404) == unknown
    assert await pci_reader.link(bank_token["id"], card_token["id"], 404) == unknown
    assert await links_between(api.client, tenant.tenant_id, card_token["id"],
                               bank_token["id"]) == 0
    await both_reader.link(card_token["id"], bank_token["id"], 201)


async def test_linking_without_read_anywhere_is_403(api, caller):
    a, b = await api.create(customer()), await api.create(card())
    creator = await caller(rule("/", "reveal", ["token:create"]), permissions=["token:create"])
    problem = await creator.link(a["id"], b["id"], 403)
    assert problem["status"] == 403


async def test_unlinking_needs_token_delete(api, caller, tenant):
    parent, child = await api.create(card()), await api.create(bank())
    await api.link(parent["id"], child["id"])
    reader = await caller(rule("/", "reveal", READ), permissions=READ)
    await reader.unlink(parent["id"], child["id"], 403)
    # token:delete under /pci/ only: the /bank/ child is out of reach, as if unknown.
    pci_deleter = await caller(rule("/pci/", "redact", ["token:delete"]),
                               permissions=["token:delete"])
    unknown = await api.get("no-such-token", 404)
    assert await pci_deleter.unlink(parent["id"], child["id"], 404) == unknown
    assert await links_between(api.client, tenant.tenant_id, parent["id"], child["id"]) == 1
    deleter = await caller(rule("/pci/", "redact", ["token:delete"]),
                           rule("/bank/", "redact", ["token:delete"]),
                           permissions=["token:delete"])
    assert await deleter.unlink(parent["id"], child["id"], 204) is None
    assert await links_between(api.client, tenant.tenant_id, parent["id"], child["id"]) == 0


async def test_unlinking_a_missing_link_is_404(api):
    parent, child = await api.create(customer()), await api.create(card())
    resp = await api.client.delete(f"/tokens/{parent['id']}/children/{child['id']}",
                                   headers=api.headers)
    assert resp.status == 404
    assert resp.content_type == PROBLEM_JSON
    await api.link(parent["id"], child["id"])
    await api.unlink(child["id"], parent["id"], 404)  # links are directed
    await api.unlink(parent["id"], child["id"], 204)
    await api.unlink(parent["id"], child["id"], 404)


async def test_concurrent_unlinks_remove_the_link_once(api, tenant):
    parent, child = await api.create(customer()), await api.create(card())
    await api.link(parent["id"], child["id"])
    responses = await asyncio.gather(*(
        api.client.delete(f"/tokens/{parent['id']}/children/{child['id']}", headers=api.headers)
        for _ in range(10)))
    assert sorted(r.status for r in responses) == [204] + [404] * 9
    assert await links_between(api.client, tenant.tenant_id, parent["id"], child["id"]) == 0


async def test_deleting_a_token_removes_its_links_but_not_its_linked_tokens(api, tenant):
    grandparent = await api.create(customer("Grace"))
    parent = await api.create(customer())
    child = await api.create(card())
    await api.link(grandparent["id"], parent["id"])
    await api.link(parent["id"], child["id"])
    await api.delete(parent["id"])
    # The children and parents stay, unlinked; the audit reference keeps no edge.
    assert (await api.get(child["id"]))["id"] == child["id"]
    assert (await api.get(grandparent["id"]))["id"] == grandparent["id"]
    assert (await api.parents(child["id"]))["data"] == []
    assert (await api.children(grandparent["id"]))["data"] == []
    rows = await cypher(api.client, "MATCH (d:DeletedToken {tenant_id: $t, id: $id}) "
                                    "RETURN count { (d)--() } AS edges",
                        t=tenant.tenant_id, id=parent["id"])
    assert rows == [{"edges": 0}]


async def test_a_reused_id_does_not_inherit_the_deleted_tokens_links(api):
    parent = await api.create(customer())
    child = await api.create(card(id="card-to-reuse"))
    await api.link(parent["id"], child["id"])
    await api.delete(child["id"])
    await api.create(card(id="card-to-reuse"))
    assert (await api.children(parent["id"]))["data"] == []
