"""Update Token (PATCH /tokens/{id}): merge-patch media type, merge or replace per field,
validation on the merged token, modified_by/modified_at, transforms, and no lost update
(docs/tokens-and-expressions.md, "Updates")."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from factories import key_headers, make_application

from ._support import MASTERCARD, VISA, assert_names, card, cypher, rule

# --- the media type: merge-patch, 415 else --------------------------------------------------

@pytest.mark.parametrize("content_type", ["application/json", "text/plain",
                                          "application/json-patch+json"])
async def test_other_content_type_is_415(api, content_type):
    created = await api.create({"type": "token", "data": {"a": 1}})
    problem = await api.patch(created["id"], {"data": {"a": 2}}, content_type=content_type,
                              expect=415)
    assert problem["type"].endswith("/unsupported-media-type")
    assert (await api.get(created["id"]))["data"] == {"a": 1}


async def test_missing_content_type_is_415(api, client, admin_headers):
    created = await api.create({"type": "token", "data": 1})
    resp = await client.patch(f"/tokens/{created['id']}", data=b'{"metadata": {"a": "b"}}',
                              headers=admin_headers)
    assert resp.status == 415
    assert resp.content_type == "application/problem+json"


async def test_merge_patch_content_type_with_charset_is_accepted(api):
    created = await api.create({"type": "token", "data": 1})
    await api.patch(created["id"], {"metadata": {"a": "b"}},
                    content_type="application/merge-patch+json; charset=utf-8")


async def test_body_must_be_a_json_object(api):
    created = await api.create({"type": "token", "data": 1})
    await api.patch(created["id"], [1, 2], expect=400)


# --- every field optional -------------------------------------------------------------------

async def test_empty_patch_changes_nothing_but_modified(api):
    created = await api.create({**card(VISA), "metadata": {"k": "v"}})
    updated = await api.patch(created["id"], {})
    for field in ("data", "metadata", "containers", "fingerprint", "fingerprint_expression",
                  "search_indexes", "mask", "created_at", "created_by"):
        assert updated[field] == created[field], field


async def test_update_sets_modified_by_and_modified_at(api, client, admin_headers, tenant):
    created = await api.create({"type": "token", "data": 1})
    assert "modified_by" not in created and "modified_at" not in created
    editor_app = await make_application(
        client, admin_headers, permissions=["token:read", "token:update"],
        rules=[rule("/", "reveal", ["token:read", "token:update"])], name="editor")
    updated = await api.patch(created["id"], {"data": 2}, headers=key_headers(editor_app))
    assert updated["modified_by"] == editor_app["id"] != tenant.application_id
    modified = datetime.fromisoformat(updated["modified_at"])
    assert modified.tzinfo is not None
    assert modified >= datetime.fromisoformat(created["created_at"])
    assert updated["created_by"] == tenant.application_id
    got = await api.get(created["id"])
    assert got["modified_by"] == updated["modified_by"]
    assert got["modified_at"] == updated["modified_at"]


# --- merge-patch fields: data, mask, metadata -----------------------------------------------

async def test_data_is_merge_patched(api):
    created = await api.create({"type": "token", "data": {"a": 1, "b": {"c": 2, "d": 3}}})
    updated = await api.patch(created["id"], {"data": {"b": {"c": 9, "d": None}, "e": [1]}})
    assert updated["data"] == {"a": 1, "b": {"c": 9}, "e": [1]}
    assert (await api.get(created["id"]))["data"] == updated["data"]


async def test_non_object_data_patch_replaces(api):
    created = await api.create({"type": "token", "data": {"a": 1}})
    assert (await api.patch(created["id"], {"data": [1, 2]}))["data"] == [1, 2]
    assert (await api.patch(created["id"], {"data": "text"}))["data"] == "text"


async def test_data_cannot_be_removed(api):
    created = await api.create({"type": "token", "data": {"a": 1}})
    assert_names(await api.patch(created["id"], {"data": None}, expect=400), "data")


async def test_mask_is_merge_patched(api, masking):
    created = await api.create({"type": "token", "data": {"name": "Ada", "pin": "1234"},
                                "mask": {"name": "{{ data.name }}", "pin": "****"}})
    updated = await api.patch(created["id"], {"mask": {"pin": None,
                                                       "hint": "{{ data.pin | last4 }}"}})
    assert updated["mask"] == {"name": "{{ data.name }}", "hint": "{{ data.pin | last4 }}"}
    assert (await api.get(created["id"], headers=masking))["data"] == {"name": "Ada",
                                                                     "hint": "1234"}


async def test_a_mask_patch_merges_into_the_type_default_the_token_shows(api, masking):
    # A card without a mask of its own shows its type's; patching one field of it keeps
    # the others (RFC 7386 on what the token shows, not on an empty mask).
    created = await api.create(card(VISA, expiration_month=12, expiration_year=2030))
    default = created["mask"]
    assert {"number", "expiration_month", "expiration_year"} <= set(default)
    before = (await api.get(created["id"], headers=masking))["data"]
    updated = await api.patch(created["id"], {"mask": {"number": "{{ data.number | last4 }}"}})
    assert updated["mask"] == {**default, "number": "{{ data.number | last4 }}"}
    after = (await api.get(created["id"], headers=masking))["data"]
    assert after == {**before, "number": VISA[-4:]}
    assert after["expiration_year"] == before["expiration_year"] is not None


async def test_removing_the_mask_falls_back_to_the_type_default(api):
    created = await api.create({**card(VISA), "mask": "{{ data.number | last4 }}"})
    updated = await api.patch(created["id"], {"mask": None})
    assert updated["mask"]["number"] == "{{ data.number | card_mask }}"


async def test_metadata_is_merge_patched(api):
    created = await api.create({"type": "token", "data": 1,
                                "metadata": {"keep": "1", "change": "2", "drop": "3"}})
    updated = await api.patch(created["id"], {"metadata": {"change": "two", "drop": None,
                                                           "add": "4"}})
    assert updated["metadata"] == {"keep": "1", "change": "two", "add": "4"}


async def test_metadata_null_removes_every_entry(api):
    created = await api.create({"type": "token", "data": 1, "metadata": {"a": "1"}})
    assert (await api.patch(created["id"], {"metadata": None}))["metadata"] == {}
    assert await api.ids([("metadata.a", "1")]) == []


async def test_metadata_filters_follow_the_update(api):
    created = await api.create({"type": "token", "data": 1, "metadata": {"stage": "new"}})
    await api.patch(created["id"], {"metadata": {"stage": "Done"}})
    assert await api.ids([("metadata.stage", "new")]) == []
    assert await api.ids([("metadata.stage", "done")]) == [created["id"]]


# --- replace fields -------------------------------------------------------------------------

async def test_containers_are_replaced(api):
    created = await api.create({"type": "token", "data": 1, "containers": ["/a/", "/b/"]})
    assert (await api.patch(created["id"], {"containers": ["/C/"]}))["containers"] == ["/c/"]


async def test_search_indexes_are_replaced(api):
    created = await api.create({"type": "token", "data": "abc",
                                "search_indexes": ["{{ data }}", "{{ data | last4 }}"]})
    updated = await api.patch(created["id"], {"search_indexes": ["{{ data | to_base64 }}"]})
    assert updated["search_indexes"] == ["{{ data | to_base64 }}"]


async def test_fingerprint_expression_is_replaced_and_fingerprint_recomputed(api):
    created = await api.create({"type": "token", "data": {"a": "1", "b": "2"}})
    updated = await api.patch(created["id"], {"fingerprint_expression": "{{ data.a }}"})
    assert updated["fingerprint_expression"] == "{{ data.a }}"
    assert updated["fingerprint"] != created["fingerprint"]
    reset = await api.patch(created["id"], {"fingerprint_expression": None})
    assert reset["fingerprint_expression"] == "{{ data | stringify }}"
    assert reset["fingerprint"] == created["fingerprint"]


async def test_fingerprint_follows_a_data_change(api):
    created = await api.create({"type": "card_number", "data": VISA})
    updated = await api.patch(created["id"], {"data": MASTERCARD})
    other = await api.create({"type": "card_number", "data": MASTERCARD})
    assert updated["fingerprint"] == other["fingerprint"] != created["fingerprint"]


async def test_expires_at_is_replaced_and_removed(api):
    created = await api.create({"type": "token", "data": 1})
    later = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    updated = await api.patch(created["id"], {"expires_at": later.isoformat()})
    assert datetime.fromisoformat(updated["expires_at"]) == later
    unchanged = await api.patch(created["id"], {"metadata": {"a": "b"}})
    assert datetime.fromisoformat(unchanged["expires_at"]) == later
    cleared = await api.patch(created["id"], {"expires_at": None})
    assert "expires_at" not in cleared


async def test_deduplicate_token_is_replaced(api, client, tenant):
    created = await api.create({"type": "token", "data": 1})
    await api.patch(created["id"], {"deduplicate_token": True})
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                "RETURN t.deduplicate_token AS d", t=tenant.tenant_id,
                        id=created["id"])
    assert rows == [{"d": True}]


# --- validation on the merged result --------------------------------------------------------

async def test_validation_runs_on_the_merged_token(api):
    created = await api.create(card(VISA, expiration_month=1))
    problem = await api.patch(created["id"], {"data": {"number": "4242424242424241"}},
                              expect=400)
    assert_names(problem, "data.number")
    assert "4242424242424241" not in str(problem)
    problem = await api.patch(created["id"], {"data": {"expiration_month": 13}}, expect=400)
    assert_names(problem, "data.expiration_month")
    assert (await api.get(created["id"]))["data"] == {"number": VISA, "expiration_month": 1}


async def test_removing_a_required_field_is_400(api):
    created = await api.create({"type": "bank", "data": {"routing_number": "021000021",
                                                         "account_number": "123"}})
    assert_names(await api.patch(created["id"], {"data": {"account_number": None}}, expect=400),
                 "data.account_number")


@pytest.mark.parametrize(("field", "value"), [
    ("mask", "{{ data | nope }}"), ("fingerprint_expression", "{{ data "),
    ("containers", ["no-slash"]), ("expires_at", "yesterday"), ("metadata", {"a": 1}),
])
async def test_bad_field_is_400_naming_it(api, field, value):
    created = await api.create({"type": "token", "data": 1})
    problem = await api.patch(created["id"], {field: value}, expect=400)
    assert any(name.startswith(field) for name in problem["errors"]), problem


@pytest.mark.parametrize("field", ["id", "type", "fingerprint", "tenant_id", "created_at"])
async def test_fields_that_cannot_change_are_400(api, field):
    created = await api.create({"type": "token", "data": 1})
    assert_names(await api.patch(created["id"], {field: "x"}, expect=400), field)


async def test_past_expires_at_is_400(api):
    created = await api.create({"type": "token", "data": 1})
    assert_names(await api.patch(created["id"], {"expires_at": "1/1/2000"}, expect=400),
                 "expires_at")


# --- who may update, and what the response shows --------------------------------------------

async def test_unknown_or_foreign_token_is_404(api, other_tenant_api):
    theirs = await other_tenant_api.create({"type": "token", "data": 1})
    unknown = await api.patch("no-such-token", {"data": 2}, expect=404)
    assert await api.patch(theirs["id"], {"data": 2}, expect=404) == unknown
    assert (await other_tenant_api.get(theirs["id"]))["data"] == 1


async def test_update_without_token_update_is_403(api, app_headers):
    reader = await app_headers(rule("/", "reveal", ["token:read"]), permissions=["token:read"])
    created = await api.create({"type": "token", "data": 1})
    await api.patch(created["id"], {"data": 2}, headers=reader, expect=403)


async def test_token_outside_the_callers_update_rules_is_404(api, app_headers):
    pci = await app_headers(rule("/pci/", "reveal", ["token:read", "token:update"]))
    created = await api.create({"type": "token", "data": 1})
    await api.patch(created["id"], {"data": 2}, headers=pci, expect=404)


async def test_moving_a_token_out_of_the_callers_containers_is_403(api, app_headers):
    pci = await app_headers(rule("/pci/", "reveal", ["token:read", "token:update"]))
    created = await api.create(card(VISA))
    await api.patch(created["id"], {"containers": ["/general/"]}, headers=pci, expect=403)
    assert (await api.get(created["id"]))["containers"] == ["/pci/high/"]


async def test_update_response_applies_the_callers_transform(api, masking, redacting):
    created = await api.create(card(VISA))
    masked = await api.patch(created["id"], {"data": {"number": MASTERCARD}}, headers=masking)
    assert masked["data"]["number"] == "555555XXXXXX4444"
    redacted = await api.patch(created["id"], {"metadata": {"a": "b"}}, headers=redacting)
    assert "data" not in redacted and "mask" not in redacted


async def test_update_response_shows_fingerprint_expression(api):
    created = await api.create({"type": "token", "data": 1})
    updated = await api.patch(created["id"], {"data": 2})
    assert updated["fingerprint_expression"] == "{{ data | stringify }}"


# --- no lost update ------------------------------------------------------------------------------

async def test_concurrent_patches_lose_no_update(api):
    created = await api.create({"type": "token", "data": {"n": 0}})
    patches = [api.patch(created["id"], {"metadata": {f"key{i}": str(i)}}) for i in range(50)]
    await asyncio.gather(*patches)
    got = await api.get(created["id"])
    assert got["metadata"] == {f"key{i}": str(i) for i in range(50)}
    # and every entry is filterable
    for i in (0, 17, 49):
        assert await api.ids([(f"metadata.key{i}", str(i))]) == [created["id"]]


async def test_concurrent_data_patches_lose_no_update(api):
    created = await api.create({"type": "token", "data": {}})
    await asyncio.gather(*(api.patch(created["id"], {"data": {f"f{i}": i}}) for i in range(30)))
    assert (await api.get(created["id"]))["data"] == {f"f{i}": i for i in range(30)}
