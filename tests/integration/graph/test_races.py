"""Linking races a delete, a dedup merge or the expiry sweep of one of its ends
(docs/graph.md): the link statement read both ends live, then waited for a lock the other
write held. Each test holds that write open in a transaction of its own, lets the request block on
it, commits it, and checks the request's answer against the state it committed into."""

from __future__ import annotations

from factories import blocked_behind, held_delete

from ._support import customer, cypher


async def dead_links(client, tenant_id: str) -> int:
    """PARENT_OF edges that touch a token no longer live (a design rule: there are none)."""
    rows = await cypher(client, "MATCH (d:DeletedToken {tenant_id: $t})-[r:PARENT_OF]-() "
                                "RETURN count(r) AS n", t=tenant_id)
    return rows[0]["n"]


async def test_a_link_to_a_token_deleted_meanwhile_is_404(api, client, tenant):
    await api.create(customer(id="race-parent"))
    await api.create(customer(id="race-child"))
    app = client.server.app
    await blocked_behind(app, held_delete(app, tenant.tenant_id, "race-child"),
                         api.link("race-parent", "race-child", 404), statement="graph/link")
    assert await dead_links(client, tenant.tenant_id) == 0
    assert (await api.children("race-parent"))["data"] == []


async def test_a_link_from_a_parent_deleted_meanwhile_is_404(api, client, tenant):
    await api.create(customer(id="gone-parent"))
    await api.create(customer(id="kept-child"))
    app = client.server.app
    await blocked_behind(app, held_delete(app, tenant.tenant_id, "gone-parent"),
                         api.link("gone-parent", "kept-child", 404), statement="graph/link")
    assert await dead_links(client, tenant.tenant_id) == 0
    assert (await api.parents("kept-child"))["data"] == []


async def test_a_link_to_a_token_merged_away_meanwhile_is_404(api, client, tenant):
    # An update with dedup folds "twin" into "original" (links moved, twin retired) while the
    # link to twin waits: serially the caller gets 404 or a link that moved to original, never
    # a 201 for a link nobody can see.
    await api.create(customer(id="some-parent"))
    await api.create(customer(id="original"))
    await api.create(customer(id="twin"))
    app = client.server.app
    await blocked_behind(app, held_delete(app, tenant.tenant_id, "twin", merged_into="original"),
                         api.link("some-parent", "twin", 404), statement="graph/link")
    assert await dead_links(client, tenant.tenant_id) == 0


async def test_a_child_created_under_a_parent_deleted_meanwhile_is_404(api, client, tenant):
    await api.create(customer(id="doomed-parent"))
    app = client.server.app
    await blocked_behind(app, held_delete(app, tenant.tenant_id, "doomed-parent"),
                         api.create_child("doomed-parent", customer(id="orphan"), 404),
                         statement="tokens/create")
    await api.get("orphan", 404)  # nothing was created: no token, no link
    assert await dead_links(client, tenant.tenant_id) == 0
    rows = await cypher(client, "MATCH (n {tenant_id: $t, id: 'orphan'}) RETURN count(n) AS n",
                        t=tenant.tenant_id)
    assert rows == [{"n": 0}]


async def test_blocked_behind_waits_for_the_request_to_block(client, tenant, api):
    """The helper itself: a request that takes no lock the held write holds is not waited
    for in vain; it fails the test at once instead of passing it by luck."""
    await api.create(customer(id="free-a"))
    await api.create(customer(id="free-b"))
    await api.create(customer(id="held-c"))
    app = client.server.app
    try:
        await blocked_behind(app, held_delete(app, tenant.tenant_id, "held-c"),
                             api.link("free-a", "free-b"), statement="graph/link", within=5)
    except AssertionError as e:
        assert "did not wait" in str(e)
    else:
        raise AssertionError("blocked_behind passed a request that never blocked")
