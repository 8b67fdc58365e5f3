"""GET /tokens/{id}/children: a parent's children, paged, filtered, each as the caller may see
it; and the mirror listing of a token's parents."""

from __future__ import annotations

from ._support import MASTERCARD, bank, card, customer, expire
from .conftest import READ, rule


async def family(api, children: int = 5):
    parent = await api.create(customer())
    kids = []
    for i in range(children):
        body = card(MASTERCARD, id=f"card-{i:02d}") if i % 2 else bank(id=f"bank-{i:02d}")
        kids.append(await api.create_child(parent["id"], body))
    return parent, kids


async def test_children_are_listed_in_id_order_across_pages(api):
    parent, kids = await family(api, 5)
    listed = await api.all_pages(api.children, parent["id"], size=2)
    assert [t["id"] for t in listed] == sorted(k["id"] for k in kids)
    first = await api.children(parent["id"], [("size", "2")])
    assert first["pagination"]["page_size"] == 2 and first["pagination"]["next"]


async def test_children_filter_by_id_and_type(api):
    parent, _ = await family(api, 5)
    by_type = await api.all_pages(api.children, parent["id"], [("type", "card")])
    assert [t["id"] for t in by_type] == ["card-01", "card-03"]
    by_id = await api.children(parent["id"], [("id", "bank-00"), ("id", "card-03"),
                                              ("id", "not-a-child")])
    assert [t["id"] for t in by_id["data"]] == ["bank-00", "card-03"]
    both = await api.children(parent["id"], [("id", "bank-00"), ("id", "card-03"),
                                             ("type", "bank")])
    assert [t["id"] for t in both["data"]] == ["bank-00"]
    none = await api.children(parent["id"], [("type", "social_security_number")])
    assert none == {"pagination": {"page_size": 20, "next": None}, "data": []}


async def test_children_are_shown_per_the_callers_rules_and_unreadable_ones_left_out(
        api, caller):
    parent, _ = await family(api, 4)
    viewer = await caller(rule("/general/", "redact", READ, priority=1),
                          rule("/pci/", "mask", READ, priority=2), permissions=READ)
    listed = (await viewer.children(parent["id"]))["data"]
    assert [t["id"] for t in listed] == ["card-01", "card-03"]  # /bank/ is out of reach
    for token in listed:
        assert token["data"]["number"] != MASTERCARD
        assert token["data"]["number"].endswith("4444")
    revealed = (await api.children(parent["id"]))["data"]
    assert {t["id"]: t["data"] for t in revealed}["card-01"]["number"] == MASTERCARD


async def test_expired_children_are_left_out(api, tenant):
    parent, kids = await family(api, 3)
    await expire(api.client, tenant.tenant_id, kids[0]["id"])
    listed = (await api.children(parent["id"]))["data"]
    assert [t["id"] for t in listed] == sorted(k["id"] for k in kids[1:])


async def test_unreadable_unknown_or_expired_parent_is_404(api, caller, tenant, other_tenant):
    parent, _ = await family(api, 2)
    unknown = await api.get("no-such-token", 404)
    pci_only = await caller(rule("/pci/", "reveal", READ), permissions=READ)
    assert await pci_only.children(parent["id"], expect_status=404) == unknown
    assert await other_tenant.children(parent["id"], expect_status=404) == unknown
    assert await api.children("no-such-token", expect_status=404) == unknown
    await expire(api.client, tenant.tenant_id, parent["id"])
    assert await api.children(parent["id"], expect_status=404) == unknown


async def test_listing_children_needs_token_read(api, caller):
    parent, _ = await family(api, 1)
    creator = await caller(rule("/", "reveal", ["token:create"]), permissions=["token:create"])
    await creator.children(parent["id"], expect_status=403)


async def test_bad_page_parameters_are_400(api):
    parent, _ = await family(api, 1)
    for params in ([("size", "0")], [("size", "101")], [("start", "%%%")]):
        problem = await api.children(parent["id"], params, 400)
        assert list(problem["errors"]) == [params[0][0]], problem


async def test_parents_are_listed_like_children(api, caller):
    child = await api.create(card())
    parents = [await api.create(customer(f"P{i}", id=f"parent-{i}")) for i in range(3)]
    hidden = await api.create(bank(id="parent-bank"))
    for p in [*parents, hidden]:
        await api.link(p["id"], child["id"])
    listed = await api.all_pages(api.parents, child["id"], size=2)
    assert [t["id"] for t in listed] == ["parent-0", "parent-1", "parent-2", "parent-bank"]
    assert [t["id"] for t in (await api.parents(child["id"], [("type", "bank")]))["data"]] == [
        "parent-bank"]
    viewer = await caller(rule("/pci/", "mask", READ), rule("/general/", "redact", READ),
                          permissions=READ)
    seen = (await viewer.parents(child["id"]))["data"]
    assert [t["id"] for t in seen] == ["parent-0", "parent-1", "parent-2"]
    assert all("data" not in t for t in seen)  # redacted
    await viewer.parents(hidden["id"], expect_status=404)
