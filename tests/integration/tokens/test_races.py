"""A token write racing another write of the same token: the request read the token live, then
waited for the lock the other write held, and must act on what that write committed (a
delete, a dedup merge, an expiry extension), as if the two had run one after the other.

Each test holds the other write open in a transaction of its own (factories.blocked_behind),
lets the request block on it, commits it, then checks the request's answer and the stored
state."""

from __future__ import annotations

from factories import blocked_behind, held_delete

from ._support import cypher


async def reference(client, tenant_id: str, token_id: str) -> list[dict]:
    return await cypher(client, "MATCH (d {tenant_id: $t, id: $id}) "
                                "RETURN labels(d) AS labels, d.deleted_reason AS reason, "
                                "d.deleted_by AS by, d.merged_into AS merged_into",
                        t=tenant_id, id=token_id)


async def test_a_patch_of_a_token_deleted_meanwhile_is_404(api, client, tenant):
    # Once 400 "containers: must hold at least one container": the update went on with the
    # deleted token's audit reference.
    created = await api.create({"type": "token", "data": 1})
    app = client.server.app
    problem = await blocked_behind(
        app, held_delete(app, tenant.tenant_id, created["id"]),
        api.patch(created["id"], {"data": 2}, expect=404), statement="tokens/lock_for_update")
    assert problem == await api.patch("no-such-token", {"data": 2}, expect=404)


async def test_a_complete_patch_of_a_token_deleted_meanwhile_is_404(api, client, tenant):
    # Once 403 "needs a rule that reveals": the patch was compared with the deleted token's
    # audit reference, which has no mask, fingerprint expression or search indexes.
    created = await api.create({"type": "token", "data": 1, "containers": ["/a/"]})
    app = client.server.app
    await blocked_behind(
        app, held_delete(app, tenant.tenant_id, created["id"]),
        api.patch(created["id"], {"data": 2, "containers": ["/a/"]}, expect=404),
        statement="tokens/lock_for_update")
    [ref] = await reference(client, tenant.tenant_id, created["id"])
    assert (ref["labels"], ref["by"]) == (["DeletedToken"], "racing-app")


async def test_a_patch_of_a_token_merged_away_meanwhile_is_404(api, client, tenant):
    original = await api.create({"type": "token", "data": "same"})
    twin = await api.create({"type": "token", "data": "other"})
    app = client.server.app
    await blocked_behind(
        app, held_delete(app, tenant.tenant_id, twin["id"], merged_into=original["id"]),
        api.patch(twin["id"], {"metadata": {"k": "v"}}, expect=404),
        statement="tokens/lock_for_update")
    assert (await api.get(original["id"]))["metadata"] in (None, {})


async def test_a_delete_racing_a_dedup_merge_keeps_merged_into_and_is_404(api, client, tenant):
    # Once 204, and the merge's audit reference rewritten: deleted_reason "deleted",
    # merged_into null, deleted_by the second caller.
    original = await api.create({"type": "token", "data": "same"})
    twin = await api.create({"type": "token", "data": "other"})
    app = client.server.app
    await blocked_behind(
        app, held_delete(app, tenant.tenant_id, twin["id"], merged_into=original["id"]),
        api.delete(twin["id"], expect=404), statement="tokens/delete")
    [ref] = await reference(client, tenant.tenant_id, twin["id"])
    assert ref == {"labels": ["DeletedToken"], "reason": "deduplicated", "by": "racing-app",
                   "merged_into": original["id"]}


async def test_of_two_racing_deletes_one_is_204_and_the_other_404(api, client, tenant):
    created = await api.create({"type": "token", "data": 1})
    app = client.server.app
    await blocked_behind(app, held_delete(app, tenant.tenant_id, created["id"]),
                         api.delete(created["id"], expect=404), statement="tokens/delete")
    [ref] = await reference(client, tenant.tenant_id, created["id"])
    assert (ref["reason"], ref["by"]) == ("deleted", "racing-app")
