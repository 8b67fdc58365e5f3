"""Beyond the interface: GET /tokens/{id}/graph walks links through readable live tokens only,
ends on cycles, and is bounded."""

from __future__ import annotations

from vaultgraph.services.graph import MAX_NODES

from ._support import MASTERCARD, bank, card, customer, cypher, expire
from .conftest import READ, rule


def ids(graph: dict) -> list[str]:
    return [n["id"] for n in graph["nodes"]]


def edges(graph: dict) -> set[tuple[str, str]]:
    pairs = [(e["parent_id"], e["child_id"]) for e in graph["edges"]]
    assert len(pairs) == len(set(pairs)), "an edge is listed twice"
    return set(pairs)


async def tokens(api, *names: str, body=customer) -> dict[str, str]:
    return {name: (await api.create(body(id=name)))["id"] for name in names}


async def test_children_to_the_requested_depth(api):
    await tokens(api, "cust", "billing")
    await api.create(card(id="card-1"))
    await api.create(card(MASTERCARD, id="card-2"))
    await api.create(bank(id="acct"))
    for child in ("card-1", "card-2", "acct"):
        await api.link("cust", child)
    await api.link("card-1", "billing")

    one = await api.graph("cust", [("depth", "1")])
    assert ids(one)[0] == "cust" and sorted(ids(one)) == ["acct", "card-1", "card-2", "cust"]
    assert edges(one) == {("cust", "card-1"), ("cust", "card-2"), ("cust", "acct")}
    assert one["truncated"] is False

    two = await api.graph("cust")  # depth 2 by default
    assert two["depth"] == 2 and two["direction"] == "children"
    assert sorted(ids(two)) == ["acct", "billing", "card-1", "card-2", "cust"]
    assert ("card-1", "billing") in edges(two)
    card_1 = next(n for n in two["nodes"] if n["id"] == "card-1")
    assert card_1["data"]["number"] == "4242424242424242"  # the administrator reveals


async def test_cycles_end_and_nothing_repeats(api):
    await tokens(api, "a-tok", "b-tok", "c-tok")
    for parent, child in (("a-tok", "b-tok"), ("b-tok", "a-tok"), ("b-tok", "c-tok"),
                          ("c-tok", "a-tok")):
        await api.link(parent, child)
    for direction in ("children", "parents", "both"):
        graph = await api.graph("a-tok", [("depth", "5"), ("direction", direction)])
        assert sorted(ids(graph)) == ["a-tok", "b-tok", "c-tok"], direction
        assert len(ids(graph)) == 3
        assert edges(graph) == {("a-tok", "b-tok"), ("b-tok", "a-tok"), ("b-tok", "c-tok"),
                                ("c-tok", "a-tok")}, direction


async def test_directions(api):
    await tokens(api, "grand", "par", "self", "kid", "sib")
    for parent, child in (("grand", "par"), ("par", "self"), ("self", "kid"), ("par", "sib")):
        await api.link(parent, child)
    children = await api.graph("self", [("direction", "children")])
    assert sorted(ids(children)) == ["kid", "self"]
    parents = await api.graph("self", [("direction", "parents")])
    assert sorted(ids(parents)) == ["grand", "par", "self"]
    assert edges(parents) == {("grand", "par"), ("par", "self")}
    both = await api.graph("self", [("direction", "both"), ("depth", "2")])
    assert sorted(ids(both)) == ["grand", "kid", "par", "self", "sib"]
    assert edges(both) == {("grand", "par"), ("par", "self"), ("self", "kid"), ("par", "sib")}
    near = await api.graph("self", [("direction", "both"), ("depth", "1")])
    assert sorted(ids(near)) == ["kid", "par", "self"]


async def test_links_among_the_tokens_found_are_all_shown(api):
    await tokens(api, "root", "left", "right")
    for parent, child in (("root", "left"), ("root", "right"), ("left", "right")):
        await api.link(parent, child)
    graph = await api.graph("root", [("depth", "1")])
    assert edges(graph) == {("root", "left"), ("root", "right"), ("left", "right")}


async def test_paths_through_unreadable_tokens_are_not_revealed(api, caller):
    await tokens(api, "root", "behind", "beside")
    await api.create(card(id="pci-card"))
    await api.link("root", "pci-card")
    await api.link("pci-card", "behind")  # readable, but only through the card
    await api.link("root", "beside")
    viewer = await caller(rule("/general/", "mask", READ), permissions=READ)
    graph = await viewer.graph("root", [("depth", "5"), ("direction", "both")])
    assert sorted(ids(graph)) == ["beside", "root"]
    assert edges(graph) == {("root", "beside")}
    # Reached another way, the same token shows, with only the links the caller may see.
    await api.link("beside", "behind")
    graph = await viewer.graph("root", [("depth", "5")])
    assert sorted(ids(graph)) == ["behind", "beside", "root"]
    assert edges(graph) == {("root", "beside"), ("beside", "behind")}


async def test_expired_tokens_are_neither_shown_nor_crossed(api, tenant):
    await tokens(api, "root", "gone", "after")
    await api.link("root", "gone")
    await api.link("gone", "after")
    await expire(api.client, tenant.tenant_id, "gone")
    graph = await api.graph("root", [("depth", "3")])
    assert ids(graph) == ["root"] and graph["edges"] == []


async def test_nodes_are_shown_per_the_callers_rules(api, caller):
    await tokens(api, "cust")
    await api.create(card(id="the-card"))
    await api.link("cust", "the-card")
    viewer = await caller(rule("/pci/", "mask", READ), rule("/general/", "redact", READ),
                          permissions=READ)
    nodes = {n["id"]: n for n in (await viewer.graph("cust"))["nodes"]}
    assert "data" not in nodes["cust"]
    assert nodes["the-card"]["data"]["number"].endswith("4242")
    assert nodes["the-card"]["data"]["number"] != "4242424242424242"


async def test_an_unreadable_unknown_or_foreign_root_is_404(api, caller, other_tenant, tenant):
    await tokens(api, "root")
    await api.create(card(id="the-card"))
    unknown = await api.get("no-such-token", 404)
    viewer = await caller(rule("/general/", "mask", READ), permissions=READ)
    assert await viewer.graph("the-card", expect_status=404) == unknown
    assert await other_tenant.graph("root", expect_status=404) == unknown
    assert await api.graph("no-such-token", expect_status=404) == unknown
    await expire(api.client, tenant.tenant_id, "root")
    assert await api.graph("root", expect_status=404) == unknown


async def test_depth_and_direction_are_checked(api):
    await tokens(api, "root")
    for params in ([("depth", "0")], [("depth", "6")], [("depth", "two")], [("depth", "²")],
                   [("depth", "-1")], [("direction", "up")]):
        problem = await api.graph("root", params, 400)
        # Exactly the parameter that is wrong (an empty answer, or another name, would not do).
        assert list(problem["errors"]) == [params[0][0]], params


async def test_a_large_neighbourhood_is_cut_and_says_so(api, tenant):
    await tokens(api, "hub")
    # Test data set-up: more children than one answer holds, written directly.
    await cypher(api.client, """
        MATCH (hub:Token {tenant_id: $t, id: 'hub'})
        UNWIND range(1, $n) AS i
        CREATE (hub)-[:PARENT_OF {created_at: datetime()}]->(:Token {
          tenant_id: $t, id: 'leaf-' + i, type: 'token', containers: ['/general/high/'],
          metadata: '{}', created_at: datetime(), created_by: 'test'})""",
                 t=tenant.tenant_id, n=MAX_NODES + 100)
    graph = await api.graph("hub", [("depth", "3")])
    assert graph["truncated"] is True
    assert len(graph["nodes"]) == MAX_NODES and ids(graph)[0] == "hub"
    shown = set(ids(graph))
    assert len(graph["edges"]) == MAX_NODES - 1
    assert all(p in shown and c in shown for p, c in edges(graph))
