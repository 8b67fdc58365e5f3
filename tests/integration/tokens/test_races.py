"""A token write racing another write of the same token: the request read the token live, then
waited for the lock the other write held, and must act on what that write committed (a
delete, a dedup merge, an expiry extension), as if the two had run one after the other.

Each test holds the other write open in a transaction of its own (factories.blocked_behind),
lets the request block on it, commits it, then checks the request's answer and the stored
state."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from factories import blocked_behind, held_delete
from prometheus_client import REGISTRY

from vaultgraph.api.typedefs import services_key

from ._support import VISA, card, cypher

EXTEND = ("MATCH (t:Token {tenant_id: $tenant_id, id: $id}) "
          "SET t.expires_at = datetime() + duration('PT1H')")


async def expire_now(client, tenant_id: str, token_id: str) -> None:
    await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                         "SET t.expires_at = datetime() - duration('PT1S')",
                 t=tenant_id, id=token_id)


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
        api.patch(created["id"], {"data": 2}, expect=404), statement="tokens/update")
    assert problem == await api.patch("no-such-token", {"data": 2}, expect=404)


async def test_a_complete_patch_of_a_token_deleted_meanwhile_is_404(api, client, tenant):
    # Once 403 "needs a rule that reveals": the patch was compared with the deleted token's
    # audit reference, which has no mask, fingerprint expression or search indexes.
    created = await api.create({"type": "token", "data": 1, "containers": ["/a/"]})
    app = client.server.app
    await blocked_behind(
        app, held_delete(app, tenant.tenant_id, created["id"]),
        api.patch(created["id"], {"data": 2, "containers": ["/a/"]}, expect=404),
        statement="tokens/update")
    [ref] = await reference(client, tenant.tenant_id, created["id"])
    assert (ref["labels"], ref["by"]) == (["DeletedToken"], "racing-app")


async def test_a_patch_of_a_token_merged_away_meanwhile_is_404(api, client, tenant):
    original = await api.create({"type": "token", "data": "same"})
    twin = await api.create({"type": "token", "data": "other"})
    app = client.server.app
    await blocked_behind(
        app, held_delete(app, tenant.tenant_id, twin["id"], merged_into=original["id"]),
        api.patch(twin["id"], {"metadata": {"k": "v"}}, expect=404),
        statement="tokens/update")
    assert (await api.get(original["id"]))["metadata"] in (None, {})


async def test_a_patch_that_must_look_for_a_duplicate_waits_under_the_lock_and_is_404(
        api, client, tenant):
    # An update that turns dedup on looks for a duplicate under the dedup lock: it goes
    # straight to its transaction, which locks the token before reading it again.
    created = await api.create({"type": "token", "data": 1})
    app = client.server.app
    await blocked_behind(
        app, held_delete(app, tenant.tenant_id, created["id"]),
        api.patch(created["id"], {"deduplicate_token": True}, expect=404),
        statement="tokens/lock_for_update")
    [ref] = await reference(client, tenant.tenant_id, created["id"])
    assert (ref["labels"], ref["by"]) == (["DeletedToken"], "racing-app")


async def test_a_patch_of_a_token_expired_meanwhile_is_404(api, client, tenant):
    created = await api.create({"type": "token", "data": 1})
    await blocked_behind(
        client.server.app,
        [("MATCH (t:Token {tenant_id: $tenant_id, id: $id}) "
          "SET t.expires_at = datetime() - duration('PT1S')",
          {"tenant_id": tenant.tenant_id, "id": created["id"]})],
        api.patch(created["id"], {"metadata": {"k": "v"}}, expect=404),
        statement="tokens/update")
    [row] = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                 "RETURN t.metadata AS metadata", t=tenant.tenant_id,
                         id=created["id"])
    assert row["metadata"] == "{}"


async def properties(client, tenant_id: str, token_id: str) -> dict:
    [row] = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                 "RETURN properties(t) AS p", t=tenant_id, id=token_id)
    return row["p"]


def locked(reason: str) -> float:
    """Updates written under the token's lock so far, for `reason`."""
    return REGISTRY.get_sample_value("vaultgraph_token_updates_locked_total",
                                     {"reason": reason}) or 0.0


async def test_a_patch_of_a_token_updated_meanwhile_keeps_that_update(api, client, tenant):
    # The patch reads the token, then a concurrent update commits before the patch's write:
    # the write finds the token no longer as read, and the patch runs again on what that
    # update committed. Written from what it first read, it would put {"a": 1} back and lose
    # "b". The concurrent update is a real one replayed: the token's properties after it are
    # taken, the token is put back as it was, and the test's transaction writes them again.
    created = await api.create({"type": "token", "data": {"a": 1}})
    before = await properties(client, tenant.tenant_id, created["id"])
    await api.patch(created["id"], {"data": {"b": 2}})
    after = await properties(client, tenant.tenant_id, created["id"])
    assert after["data_ct"] != before["data_ct"]
    replace = "MATCH (t:Token {tenant_id: $tenant_id, id: $id}) SET t = $props"
    ids = {"tenant_id": tenant.tenant_id, "id": created["id"]}
    await cypher(client, replace, **ids, props=before)
    assert (await api.get(created["id"]))["data"] == {"a": 1}
    changed = locked("changed")
    answer = await blocked_behind(
        client.server.app, [(replace, {**ids, "props": after})],
        api.patch(created["id"], {"metadata": {"k": "v"}}), statement="tokens/update")
    assert (answer["data"], answer["metadata"]) == ({"a": 1, "b": 2}, {"k": "v"})
    got = await api.get(created["id"])
    assert (got["data"], got["metadata"]) == ({"a": 1, "b": 2}, {"k": "v"})
    assert await api.ids([("metadata.k", "v")]) == [created["id"]]
    assert locked("changed") == changed + 1


async def test_a_token_that_expires_while_its_update_is_worked_out_under_the_lock_is_404(
        api, client, tenant, monkeypatch):
    # Under its lock, an update's write checks again that the token is live: one that expired
    # while the update was worked out (its expressions rendered) is not written, and the patch
    # is a 404 (once a 500: the write's empty answer was taken for a row). A patch that turns
    # dedup on goes to the lock before anything is rendered: rendered once, under it.
    expires = datetime.now(UTC) + timedelta(seconds=5)
    created = await api.create({"type": "token", "data": 1, "expires_at": expires.isoformat()})
    renderer = client.server.app[services_key].tokens.renderer
    real, renders = renderer.run_where, []

    async def slow(*args, **kwargs):  # the render outlasts the token
        renders.append(args)
        await asyncio.sleep((expires - datetime.now(UTC)).total_seconds() + 0.5)
        return await real(*args, **kwargs)

    monkeypatch.setattr(renderer, "run_where", slow)
    dedup = locked("dedup")
    await api.patch(created["id"], {"deduplicate_token": True}, expect=404)
    assert len(renders) == 1
    assert locked("dedup") == dedup + 1
    [row] = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                 "RETURN t.deduplicate_token AS dedup", t=tenant.tenant_id,
                         id=created["id"])
    assert not row["dedup"]


async def test_a_patch_of_no_token_is_decided_under_the_lock_where_reads_may_lag(
        api, client, monkeypatch):
    # On one server (the tests' Community Neo4j) the read's 404 stands; where a read may miss
    # a write made through another replica, the leader decides, under the lock.
    db = type(client.server.app[services_key].database)
    not_found = locked("not_found")
    monkeypatch.setattr(db, "reads_may_lag", property(lambda _db: False))
    await api.patch("no-such-token", {"data": 2}, expect=404)
    assert locked("not_found") == not_found
    monkeypatch.setattr(db, "reads_may_lag", property(lambda _db: True))
    await api.patch("no-such-token", {"data": 2}, expect=404)
    assert locked("not_found") == not_found + 1


async def test_a_patch_that_may_change_a_dedup_fingerprint_goes_to_the_lock_unrendered(
        api, client, monkeypatch):
    # A caller's fingerprint expression may read the metadata: a metadata patch of such a dedup
    # token may change its fingerprint, and goes to the lock before anything is rendered. One
    # whose expression is its type's own (data only) is written as read.
    renderer = client.server.app[services_key].tokens.renderer
    real, renders = renderer.run_where, []

    async def counted(*args, **kwargs):
        renders.append(args)
        return await real(*args, **kwargs)

    own = await api.create({"type": "token", "data": "x", "deduplicate_token": True,
                            "fingerprint_expression": "{{ metadata.k }}",
                            "metadata": {"k": "one"}})
    typed = await api.create({"type": "token", "data": "y", "deduplicate_token": True})
    monkeypatch.setattr(renderer, "run_where", counted)
    dedup, changed = locked("dedup"), locked("changed")
    answer = await api.patch(own["id"], {"metadata": {"k": "two"}})
    assert (len(renders), locked("dedup")) == (1, dedup + 1)
    assert answer["fingerprint"] != own["fingerprint"]
    await api.patch(typed["id"], {"metadata": {"k": "two"}})
    assert (len(renders), locked("dedup"), locked("changed")) == (2, dedup + 1, changed)


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
async def test_an_expired_id_holder_extended_meanwhile_is_not_retired(api, client, tenant):
    # POST /tokens {id} retires an expired token holding the id (docs/tokens-and-expressions.md,
    # "Expiration input").
    # When a PATCH extending that token commits first, the token is live again: the id is
    # taken (409), and the extended token keeps its data. It was once retired as "expired"
    # right after its extension was answered 200, and the new token took its id.
    await api.create({"id": "extended", "type": "token", "data": "old"})
    await expire_now(client, tenant.tenant_id, "extended")
    await blocked_behind(
        client.server.app, [(EXTEND, {"tenant_id": tenant.tenant_id, "id": "extended"})],
        api.create({"id": "extended", "type": "token", "data": "new"}, expect=409),
        statement="tokens/create")
    assert (await api.get("extended"))["data"] == "old"
    assert await reference(client, tenant.tenant_id, "extended") == [
        {"labels": ["Token"], "reason": None, "by": None, "merged_into": None}]


async def test_an_expired_id_holder_extended_meanwhile_is_taken_in_a_bulk_create(
        api, client, tenant):
    await api.create({"id": "bulk-extended", "type": "token", "data": "old"})
    await expire_now(client, tenant.tenant_id, "bulk-extended")
    resp = await blocked_behind(
        client.server.app, [(EXTEND, {"tenant_id": tenant.tenant_id, "id": "bulk-extended"})],
        client.post("/tokenize", headers=api.headers,
                    json=[{"id": "bulk-extended", "type": "token", "data": "new"},
                          {"id": "bulk-fresh", "type": "token", "data": "fresh"}]),
        statement="tokens/create_many")
    answer = await resp.json()
    assert resp.status == 200, answer
    assert [a.get("status") for a in answer] == [409, None]
    assert (await api.get("bulk-extended"))["data"] == "old"
    assert (await api.get("bulk-fresh"))["data"] == "fresh"


async def test_retiring_an_expired_id_holder_releases_its_dedup_lock(api, client, tenant):
    # The lock node (tenant, type, fingerprint) goes with the last token holding the
    # fingerprint, whichever way it goes: delete, update, sweep, and this retirement.
    old = await api.create({**card(VISA), "id": "reused", "deduplicate_token": True})
    await expire_now(client, tenant.tenant_id, "reused")
    await api.create({"id": "reused", "type": "token", "data": "another value"})
    rows = await cypher(client, "MATCH (l:DedupLock {tenant_id: $t}) RETURN l.fingerprint AS f",
                        t=tenant.tenant_id)
    assert rows == []
    assert old["fingerprint"]
    rows = await cypher(client, "MATCH (d:DeletedToken {tenant_id: $t, id: 'reused'}) "
                                "RETURN d.deleted_reason AS reason", t=tenant.tenant_id)
    assert rows == [{"reason": "expired"}]
