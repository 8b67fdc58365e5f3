"""Deduplication: `deduplicate_token` on create and update, and a duplicate the caller may not
read shown redacted (docs/tokens-and-expressions.md, "Fingerprints and deduplication")."""

from __future__ import annotations

import asyncio

import pytest

from vaultgraph.api.typedefs import services_key

from ._support import MASTERCARD, VISA, card, cypher, rule

SUMMARY_FIELDS = {"id", "type", "tenant_id", "fingerprint", "containers", "_extras"}


async def count_tokens(client, tenant_id: str) -> int:
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t}) RETURN count(t) AS n",
                        t=tenant_id)
    return rows[0]["n"]


async def link(client, tenant_id: str, parent: str, child: str) -> None:
    await cypher(client, "MATCH (p:Token {tenant_id: $t, id: $p}), (c:Token {tenant_id: $t, "
                         "id: $c}) CREATE (p)-[:PARENT_OF {created_at: datetime()}]->(c)",
                 t=tenant_id, p=parent, c=child)


# --- on create ------------------------------------------------------------------------------

async def test_dedup_create_returns_the_existing_token_with_200(api, client, tenant):
    first = await api.create({**card(VISA), "deduplicate_token": True, "metadata": {"n": "1"}})
    assert "_extras" not in first
    again = await api.create({**card(VISA, cvc="999"), "deduplicate_token": True,
                              "metadata": {"n": "2"}}, expect=200)
    assert again["id"] == first["id"]
    assert again["_extras"] == {"deduplicated": True}
    assert again["data"] == first["data"] and again["metadata"] == {"n": "1"}
    assert await count_tokens(client, tenant.tenant_id) == 1


async def test_without_deduplicate_token_a_new_token_is_created(api, client, tenant):
    first = await api.create(card(VISA))
    second = await api.create(card(VISA))
    assert second["id"] != first["id"]
    assert second["fingerprint"] == first["fingerprint"]
    third = await api.create({**card(VISA), "deduplicate_token": False})
    assert third["id"] not in (first["id"], second["id"])
    assert await count_tokens(client, tenant.tenant_id) == 3


async def test_dedup_matches_a_token_created_without_the_flag(api):
    original = await api.create(card(VISA))
    again = await api.create({**card(VISA), "deduplicate_token": True}, expect=200)
    assert again["id"] == original["id"]


async def test_dedup_returns_the_oldest_of_several_matches(api):
    # Ids in the opposite order to creation: a match by lowest (or highest) id, or by whatever
    # the index returns first, picks another token than the oldest.
    oldest = await api.create({**card(VISA), "id": "dedup-m"})
    for token_id in ("dedup-a", "dedup-z", "dedup-b"):
        await api.create({**card(VISA), "id": token_id})
    again = await api.create({**card(VISA), "deduplicate_token": True}, expect=200)
    assert again["id"] == oldest["id"] == "dedup-m"


async def test_dedup_is_per_type(api):
    await api.create({"type": "card_number", "data": VISA, "deduplicate_token": True})
    other = await api.create({"type": "token", "data": VISA, "deduplicate_token": True})
    assert "_extras" not in other


async def test_dedup_is_per_tenant(api, other_tenant_api):
    ours = await api.create({**card(VISA), "deduplicate_token": True})
    theirs = await other_tenant_api.create({**card(VISA), "deduplicate_token": True})
    assert "_extras" not in theirs and theirs["id"] != ours["id"]


async def test_dedup_follows_the_fingerprint_expression(api):
    first = await api.create({"type": "token", "data": {"email": "a@x.io", "n": 1},
                              "fingerprint_expression": "{{ data.email }}",
                              "deduplicate_token": True})
    same = await api.create({"type": "token", "data": {"email": "a@x.io", "n": 2},
                             "fingerprint_expression": "{{ data.email }}",
                             "deduplicate_token": True}, expect=200)
    assert same["id"] == first["id"]
    different = await api.create({"type": "token", "data": {"email": "b@x.io", "n": 1},
                                  "fingerprint_expression": "{{ data.email }}",
                                  "deduplicate_token": True})
    assert different["id"] != first["id"]


async def test_dedup_ignores_expired_and_deleted_tokens(api, client, tenant):
    expired = await api.create(card(VISA))
    await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                         "SET t.expires_at = datetime() - duration('PT1S')",
                 t=tenant.tenant_id, id=expired["id"])
    deleted = await api.create(card(VISA))
    await api.delete(deleted["id"])
    fresh = await api.create({**card(VISA), "deduplicate_token": True})
    assert "_extras" not in fresh
    assert fresh["id"] not in (expired["id"], deleted["id"])


async def test_dedup_with_a_given_id_returns_the_existing_id(api):
    first = await api.create({"id": "first-id", **card(VISA), "deduplicate_token": True})
    again = await api.create({"id": "second-id", **card(VISA), "deduplicate_token": True},
                             expect=200)
    assert again["id"] == first["id"] == "first-id"
    await api.get("second-id", expect=404)


async def test_50_concurrent_identical_creates_yield_exactly_one_token(api, client, tenant):
    body = {"type": "card", "data": {"number": MASTERCARD, "cvc": "321"},
            "deduplicate_token": True}
    resps = await asyncio.gather(*(client.post("/tokens", json=body, headers=api.headers)
                                   for _ in range(50)))
    statuses = sorted(r.status for r in resps)
    bodies = [await r.json() for r in resps]
    assert statuses == [200] * 49 + [201], statuses
    assert len({b["id"] for b in bodies}) == 1
    assert sum(1 for b in bodies if b.get("_extras") == {"deduplicated": True}) == 49
    assert await count_tokens(client, tenant.tenant_id) == 1


async def test_match_the_caller_cannot_read_answers_the_cut_down_view(api, app_headers):
    original = await api.create({**card(VISA), "metadata": {"owner": "finance"}})
    writer = await app_headers(rule("/pci/", "reveal", ["token:create"]),
                               permissions=["token:create"])
    again = await api.create({**card(VISA), "deduplicate_token": True}, headers=writer,
                             expect=200)
    assert set(again) == SUMMARY_FIELDS
    assert again["id"] == original["id"]
    assert again["fingerprint"] == original["fingerprint"]
    assert again["containers"] == original["containers"]
    assert again["_extras"] == {"deduplicated": True}


async def test_match_the_caller_may_read_is_shown_with_its_transform(api, masking):
    original = await api.create(card(VISA))
    again = await api.create({**card(VISA), "deduplicate_token": True}, headers=masking,
                             expect=200)
    assert again["id"] == original["id"]
    assert again["data"]["number"] == "424242XXXXXX4242"
    assert again["_extras"] == {"deduplicated": True}


# --- on update: a duplicate the caller may not read is answered redacted ----------------------

async def test_update_making_a_duplicate_merges_into_the_original(api, client, tenant):
    original = await api.create({"type": "card_number", "data": VISA})
    twin = await api.create({"type": "card_number", "data": MASTERCARD,
                             "deduplicate_token": True})
    merged = await api.patch(twin["id"], {"data": VISA})
    assert merged["id"] == original["id"]
    assert merged["data"] == VISA
    assert merged["_extras"] == {"deduplicated": True}
    await api.get(twin["id"], expect=404)
    assert await api.ids() == [original["id"]]
    rows = await cypher(client, "MATCH (d:DeletedToken {tenant_id: $t, id: $id}) "
                                "RETURN properties(d) AS p", t=tenant.tenant_id, id=twin["id"])
    [audit] = [row["p"] for row in rows]
    assert audit["deleted_reason"] == "deduplicated"
    assert audit["merged_into"] == original["id"]
    assert audit["deleted_by"] == tenant.application_id
    assert "data_ct" not in audit and "fingerprint" not in audit
    assert await count_tokens(client, tenant.tenant_id) == 1


async def test_update_with_dedup_turned_on_by_the_patch_merges(api):
    original = await api.create({"type": "card_number", "data": VISA})
    twin = await api.create({"type": "card_number", "data": MASTERCARD})
    merged = await api.patch(twin["id"], {"data": VISA, "deduplicate_token": True})
    assert merged["id"] == original["id"]


async def test_update_without_dedup_leaves_two_tokens(api):
    original = await api.create({"type": "card_number", "data": VISA})
    twin = await api.create({"type": "card_number", "data": MASTERCARD})
    updated = await api.patch(twin["id"], {"data": VISA})
    assert updated["id"] == twin["id"] and "_extras" not in updated
    assert updated["fingerprint"] == original["fingerprint"]
    assert sorted(await api.ids()) == sorted([original["id"], twin["id"]])


@pytest.mark.parametrize("patch", [{"metadata": {"note": "x"}}, {},
                                   {"data": VISA, "deduplicate_token": True}])
async def test_an_update_that_leaves_the_fingerprint_alone_merges_nothing(api, patch):
    # A twin created later without dedup is allowed; updating the first token without
    # changing its value does not make it a duplicate, so it stays itself.
    first = await api.create({"type": "card_number", "data": VISA, "deduplicate_token": True})
    twin = await api.create({"type": "card_number", "data": VISA})
    assert twin["id"] != first["id"]
    updated = await api.patch(first["id"], patch)
    assert updated["id"] == first["id"] and "_extras" not in updated
    assert sorted(await api.ids()) == sorted([first["id"], twin["id"]])


async def test_turning_dedup_on_merges_into_an_existing_twin(api):
    original = await api.create({"type": "card_number", "data": VISA})
    twin = await api.create({"type": "card_number", "data": VISA})
    merged = await api.patch(twin["id"], {"deduplicate_token": True})
    assert merged["id"] == original["id"] and merged["_extras"] == {"deduplicated": True}
    assert await api.ids() == [original["id"]]


async def test_update_merge_moves_the_links_to_the_original(api, client, tenant):
    original = await api.create({"type": "card_number", "data": VISA})
    twin = await api.create({"type": "card_number", "data": MASTERCARD,
                             "deduplicate_token": True})
    parent = await api.create({"type": "token", "data": "parent"})
    child = await api.create({"type": "token", "data": "child"})
    await link(client, tenant.tenant_id, parent["id"], twin["id"])
    await link(client, tenant.tenant_id, twin["id"], child["id"])
    await link(client, tenant.tenant_id, twin["id"], original["id"])
    await api.patch(twin["id"], {"data": VISA})
    rows = await cypher(client, "MATCH (a {tenant_id: $t})-[:PARENT_OF]->(b {tenant_id: $t}) "
                                "RETURN a.id AS parent, b.id AS child ORDER BY parent, child",
                        t=tenant.tenant_id)
    assert sorted((r["parent"], r["child"]) for r in rows) == sorted([
        (parent["id"], original["id"]), (original["id"], child["id"])])


# An update that makes a token equal to one the caller cannot read is a plain update answered
# with the cut-down summary: test_access_bypasses.py.


async def test_update_merge_into_a_readable_original_shows_it(api, masking):
    original = await api.create({"type": "card_number", "data": VISA})
    twin = await api.create({"type": "card_number", "data": MASTERCARD,
                             "deduplicate_token": True})
    merged = await api.patch(twin["id"], {"data": VISA}, headers=masking)
    assert merged["id"] == original["id"]
    assert merged["data"] == "424242XXXXXX4242"
    assert merged["fingerprint_expression"] == "{{ data | stringify }}"


async def locks(client, tenant_id: str) -> list[str]:
    rows = await cypher(client, "MATCH (l:DedupLock {tenant_id: $t}) RETURN l.fingerprint AS f",
                        t=tenant_id)
    return [r["f"] for r in rows]


async def test_a_fingerprint_s_lock_goes_with_the_last_token_holding_it(api, client, tenant):
    # A deleted token keeps no fingerprint; its dedup lock must not keep it either.
    first = await api.create({**card(VISA), "deduplicate_token": True})
    second = await api.create(card(VISA))  # the same value, no dedup: two tokens share it
    assert await locks(client, tenant.tenant_id) == [first["fingerprint"]]
    await api.delete(first["id"])
    assert await locks(client, tenant.tenant_id) == [first["fingerprint"]]  # still held
    await api.delete(second["id"])
    assert await locks(client, tenant.tenant_id) == []
    swept = await api.create({**card(MASTERCARD), "deduplicate_token": True})
    assert await locks(client, tenant.tenant_id) == [swept["fingerprint"]]
    await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                         "SET t.expires_at = datetime() - duration('PT1S')",
                 t=tenant.tenant_id, id=swept["id"])
    assert await client.server.app[services_key].expiry.sweep() >= 1
    assert await locks(client, tenant.tenant_id) == []


async def test_an_update_that_changes_the_fingerprint_lets_the_old_lock_go(api, client, tenant):
    token = await api.create({**card(VISA), "deduplicate_token": True})
    assert await locks(client, tenant.tenant_id) == [token["fingerprint"]]
    updated = await api.patch(token["id"], {"data": card(MASTERCARD)["data"]})
    assert updated["fingerprint"] != token["fingerprint"], updated
    # The old value's lock is gone; the new value's is the update's own (it serialises on it).
    assert await locks(client, tenant.tenant_id) == [updated["fingerprint"]]
