"""POST /tokens/{id}/children: a child token is created under its parent in one statement —
both or neither."""

from __future__ import annotations

from vaultgraph.tokens.types import CARD_NUMBER_MESSAGE

from ._support import bank, card, customer, cypher, expire, links_between
from .conftest import READ, rule

CHILD_FIELDS = {"id", "tenant_id", "type", "containers", "created_by", "created_at", "metadata"}


async def tenant_counts(client, tenant_id: str) -> dict:
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t}) "
                                "RETURN count(t) AS tokens, count { (t)-[:PARENT_OF]->() } AS x",
                        t=tenant_id)
    edges = await cypher(client, "MATCH (:Token {tenant_id: $t})-[r:PARENT_OF]->() "
                                 "RETURN count(r) AS n", t=tenant_id)
    return {"tokens": rows[0]["tokens"], "edges": edges[0]["n"]}


async def test_child_is_created_linked_with_the_child_view(api, tenant):
    parent = await api.create(customer())
    child = await api.create_child(parent["id"], card(metadata={"brand": "visa"},
                                                       search_indexes=["{{ data.number }}"]))
    assert CHILD_FIELDS <= set(child)
    assert not {"data", "mask", "search_indexes"} & set(child)
    assert child["metadata"] == {"brand": "visa"}
    assert child["containers"] == ["/pci/high/"]
    assert child["tenant_id"] == tenant.tenant_id
    assert await links_between(api.client, tenant.tenant_id, parent["id"], child["id"]) == 1
    # The child is a token like any other.
    assert (await api.get(child["id"]))["data"]["number"].endswith("4242")


async def test_child_answer_is_the_token_as_read_less_data_mask_and_indexes(api, caller):
    parent = await api.create(customer())
    for transform in ("mask", "reveal"):
        reader = await caller(rule("/", transform, ["token:create", "token:read"]),
                              permissions=["token:create", "token:read"], name=transform)
        child = await reader.create_child(parent["id"], card(
            mask={"number": "{{ data.number | last4 }}"}, search_indexes=["{{ data.number }}"]))
        read = await reader.get(child["id"])
        assert read["data"] == ({"number": "4242"} if transform == "mask" else card()["data"])
        assert child == {name: value for name, value in read.items()
                         if name not in {"data", "mask", "search_indexes"}}
        assert ("fingerprint" in child) == (transform == "reveal")


async def test_invalid_child_body_creates_nothing(api, tenant):
    parent = await api.create(customer())
    before = await tenant_counts(api.client, tenant.tenant_id)
    problem = await api.create_child(parent["id"], card(number="4242424242424241"), 400)
    assert problem["errors"] == {"data.number": [CARD_NUMBER_MESSAGE]}
    problem = await api.create_child(parent["id"], {"type": "card"}, 400)
    assert list(problem["errors"]) == ["data"], problem
    problem = await api.create_child(parent["id"], ["not", "an", "object"], 400)
    assert problem["detail"] == "The request body must be a JSON object."  # as on POST /tokens
    assert "errors" not in problem
    assert await tenant_counts(api.client, tenant.tenant_id) == before


async def test_child_under_an_unknown_expired_or_foreign_parent_creates_nothing(
        api, tenant, other_tenant):
    expired = await api.create(customer())
    foreign = await other_tenant.create(customer())
    await expire(api.client, tenant.tenant_id, expired["id"])
    unknown = await api.get("no-such-token", 404)
    before = await tenant_counts(api.client, tenant.tenant_id)
    for parent_id in ("no-such-token", expired["id"], foreign["id"]):
        assert await api.create_child(parent_id, card(id=f"child-of-{parent_id[:8]}"),
                                      404) == unknown
    assert await tenant_counts(api.client, tenant.tenant_id) == before
    assert (await other_tenant.children(foreign["id"]))["data"] == []


async def test_child_needs_read_on_the_parent(api, caller, tenant):
    parent = await api.create(bank())  # /bank/high/
    pci_only = await caller(rule("/pci/", "reveal", ["token:create", "token:read"]),
                            permissions=["token:create", "token:read"])
    before = await tenant_counts(api.client, tenant.tenant_id)
    await pci_only.create_child(parent["id"], card(), 404)
    assert await tenant_counts(api.client, tenant.tenant_id) == before


async def test_child_needs_create_for_its_containers(api, caller, tenant):
    parent = await api.create(customer())  # /general/high/
    creator = await caller(rule("/general/", "reveal", ["token:create", "token:read"]),
                           permissions=["token:create", "token:read"])
    before = await tenant_counts(api.client, tenant.tenant_id)
    await creator.create_child(parent["id"], card(), 403)  # a card lives in /pci/
    assert await tenant_counts(api.client, tenant.tenant_id) == before
    child = await creator.create_child(parent["id"], customer("Kid"))
    assert await links_between(api.client, tenant.tenant_id, parent["id"], child["id"]) == 1


async def test_child_route_needs_both_permissions(api, caller):
    parent = await api.create(customer())
    reader = await caller(rule("/", "reveal", READ), permissions=READ)
    await reader.create_child(parent["id"], customer("Kid"), 403)
    writer = await caller(rule("/", "reveal", ["token:create"]), permissions=["token:create"])
    await writer.create_child(parent["id"], customer("Kid"), 403)


async def test_child_with_a_taken_id_is_a_conflict_and_creates_no_link(api, tenant):
    parent = await api.create(customer())
    taken = await api.create(customer("Taken", id="taken-id"))
    await api.create_child(parent["id"], customer("Again", id="taken-id"), 409)
    assert await links_between(api.client, tenant.tenant_id, parent["id"], taken["id"]) == 0


async def test_dedup_child_links_the_existing_token_it_returns(api, tenant):
    parent = await api.create(customer())
    existing = await api.create(card())
    child = await api.create_child(parent["id"], card(deduplicate_token=True), 200)
    assert child["id"] == existing["id"]
    assert await links_between(api.client, tenant.tenant_id, parent["id"], existing["id"]) == 1


async def test_dedup_child_does_not_link_a_match_the_caller_cannot_read(api, caller, tenant):
    parent = await api.create(customer())  # /general/high/
    existing = await api.create(card())  # /pci/high/
    writer = await caller(rule("/general/", "reveal", ["token:read"]),
                          rule("/pci/", "reveal", ["token:create"]),
                          permissions=["token:create", "token:read"])
    child = await writer.create_child(parent["id"], card(deduplicate_token=True), 200)
    assert child["id"] == existing["id"]
    assert await links_between(api.client, tenant.tenant_id, parent["id"], existing["id"]) == 0
