"""Create Token (POST /tokens) and the token object it answers with."""

from __future__ import annotations

import re
import uuid
from datetime import datetime

import pytest

from ._support import AMEX, MASTERCARD, SSN, VISA, assert_names, card, cypher, rule

TOKEN_FIELDS = {"id", "tenant_id", "type", "data", "fingerprint", "fingerprint_expression",
                "containers", "metadata", "search_indexes", "created_by", "created_at"}


def iso_with_offset(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    assert parsed.tzinfo is not None, value
    return parsed


# --- request and response -------------------------------------------------------------------

async def test_create_answers_201_with_the_token_object(api, tenant):
    body = await api.create({"type": "token", "data": {"name": "Ada"},
                             "metadata": {"customer": "c-1"}})
    assert TOKEN_FIELDS <= set(body)
    assert body["tenant_id"] == tenant.tenant_id
    assert body["type"] == "token"
    assert body["data"] == {"name": "Ada"}
    assert body["metadata"] == {"customer": "c-1"}
    assert body["search_indexes"] == []
    assert body["created_by"] == tenant.application_id
    iso_with_offset(body["created_at"])
    assert "modified_at" not in body and "expires_at" not in body


async def test_omitted_id_is_a_uuid(api):
    body = await api.create({"type": "token", "data": "x"})
    assert str(uuid.UUID(body["id"])) == body["id"]


async def test_given_id_is_the_token_id(api):
    body = await api.create({"id": "customer-42", "type": "token", "data": "x"})
    assert body["id"] == "customer-42"
    assert (await api.get("customer-42"))["data"] == "x"


async def test_id_already_taken_is_409(api):
    await api.create({"id": "taken", "type": "token", "data": "x"})
    problem = await api.create({"id": "taken", "type": "token", "data": "y"}, expect=409)
    assert "y" not in problem["detail"]


async def test_id_taken_in_another_tenant_is_free(api, other_tenant_api):
    await api.create({"id": "shared-id", "type": "token", "data": "x"})
    await other_tenant_api.create({"id": "shared-id", "type": "token", "data": "y"})
    assert (await api.get("shared-id"))["data"] == "x"


@pytest.mark.parametrize("missing", ["type", "data"])
async def test_type_and_data_are_required(api, missing):
    body = {"type": "token", "data": "x"}
    del body[missing]
    assert_names(await api.create(body, expect=400), missing)


async def test_null_data_is_refused(api):
    assert_names(await api.create({"type": "token", "data": None}, expect=400), "data")


async def test_unknown_type_is_400_naming_type(api):
    assert_names(await api.create({"type": "passport", "data": "x"}, expect=400), "type")


async def test_unknown_body_field_is_400_naming_it(api):
    assert_names(await api.create({"type": "token", "data": "x", "colour": "red"}, expect=400),
                 "colour")


async def test_body_must_be_a_json_object(client, admin_headers):
    resp = await client.post("/tokens", data=b"[1, 2", headers={
        **admin_headers, "Content-Type": "application/json"})
    assert resp.status == 400
    assert resp.content_type == "application/problem+json"
    resp = await client.post("/tokens", json=[1, 2], headers=admin_headers)
    assert resp.status == 400


@pytest.mark.parametrize("path", ["/tokens", "/tokenize", "/detokenize"])
async def test_json_too_deep_to_read_is_told_apart_from_invalid_json(client, admin_headers,
                                                                      path):
    deep = b'{"type": "token", "data": ' + b"[" * 1100 + b"1" + b"]" * 1100 + b"}"
    resp = await client.post(path, data=deep, headers={
        **admin_headers, "Content-Type": "application/json"})
    assert resp.status == 400
    problem = await resp.json()
    assert "more than 1,024 levels deep" in problem["detail"], problem
    assert "not valid JSON" not in problem["detail"]


async def test_create_needs_a_json_content_type(client, admin_headers):
    resp = await client.post("/tokens", data=b'{"type": "token", "data": 1}',
                             headers={**admin_headers, "Content-Type": "text/plain"})
    assert resp.status == 415
    assert resp.content_type == "application/problem+json"


@pytest.mark.parametrize("data", [{"a": [1, {"b": None}]}, [1, "two", 3.5], "text", 42, True])
async def test_data_may_be_an_object_array_or_primitive(api, data):
    body = await api.create({"type": "token", "data": data})
    assert body["data"] == data
    assert (await api.get(body["id"]))["data"] == data


async def test_metadata_values_must_be_strings(api):
    problem = await api.create({"type": "token", "data": "x", "metadata": {"n": 1}}, expect=400)
    assert any(name.startswith("metadata") for name in problem["errors"])


async def test_containers_are_stored_lower_case(api):
    body = await api.create({"type": "token", "data": "x", "containers": ["/Team/A/", "/b/"]})
    assert body["containers"] == ["/b/", "/team/a/"]


@pytest.mark.parametrize("path", ["no-slashes", "/trailing", "/a//b/", "/a b/", "/ü/", ""])
async def test_bad_container_path_is_400_naming_containers(api, path):
    problem = await api.create({"type": "token", "data": "x", "containers": [path]}, expect=400)
    assert any(name.startswith("containers") for name in problem["errors"])


async def test_empty_containers_is_400(api):
    assert_names(await api.create({"type": "token", "data": "x", "containers": []},
                                  expect=400), "containers")


async def test_search_indexes_are_returned_as_given(api):
    indexes = ["{{ data.number | last4 }}", "{{ data.number | card_bin }}"]
    body = await api.create({**card(), "search_indexes": indexes})
    assert body["search_indexes"] == indexes
    assert (await api.get(body["id"]))["search_indexes"] == indexes


async def test_created_by_is_the_calling_application(api, client, admin_headers, tenant):
    from factories import make_application

    app = await make_application(client, admin_headers,
                                 permissions=["token:create", "token:read"],
                                 rules=[rule("/", "reveal", ["token:create", "token:read"])])
    body = await api.create({"type": "token", "data": "x"},
                            headers={"SVC-API-KEY": app["key"]})
    assert body["created_by"] == app["id"]


# --- create responses show fingerprint_expression --------------------------------------------

async def test_create_response_shows_fingerprint_expression(api):
    body = await api.create({"type": "token", "data": "x"})
    assert body["fingerprint_expression"] == "{{ data | stringify }}"
    assert isinstance(body["fingerprint"], str) and body["fingerprint"]


# --- defaults per token type (docs/tokens-and-expressions.md, "Token types") ----------------

DEFAULTS = [
    ("token", "anything", ["/general/high/"], None),
    ("card", {"number": VISA, "expiration_month": 4, "expiration_year": 2031},
     ["/pci/high/"], {"number": "{{ data.number | card_mask }}",
                      "expiration_month": "{{ data.expiration_month }}",
                      "expiration_year": "{{ data.expiration_year }}"}),
    ("bank", {"routing_number": "021000021", "account_number": "1234567890"}, ["/bank/high/"],
     {"routing_number": "{{ data.routing_number }}",
      "account_number": "{{ data.account_number | reveal_last: 4 }}"}),
    ("card_number", MASTERCARD, ["/pci/high/"], "{{ data | card_mask }}"),
    ("us_bank_account_number", "1234567890", ["/bank/high/"], "{{ data | reveal_last: 4 }}"),
    ("us_bank_routing_number", "021000021", ["/bank/low/"], "{{ data }}"),
    ("social_security_number", SSN, ["/pii/high/"], "XXX-XX-{{ data | last4 }}"),
    ("employer_id_number", "12-3456789", ["/pii/low/"], "XX-XXX{{ data | last4 }}"),
]


@pytest.mark.parametrize(("type_", "data", "containers", "mask"), DEFAULTS,
                         ids=[d[0] for d in DEFAULTS])
async def test_each_type_has_default_containers_and_mask(api, type_, data, containers, mask):
    body = await api.create({"type": type_, "data": data})
    assert body["containers"] == containers
    assert body.get("mask") == mask


MASKED = [
    ("card", {"number": VISA, "expiration_month": 4, "expiration_year": 2031, "cvc": "123"},
     {"number": "424242XXXXXX4242", "expiration_month": 4, "expiration_year": 2031}),
    ("bank", {"routing_number": "021000021", "account_number": "1234567890"},
     {"routing_number": "021000021", "account_number": "XXXXXX7890"}),
    ("card_number", AMEX, "378282XXXXX0005"),
    ("us_bank_account_number", "1234567890", "XXXXXX7890"),
    ("social_security_number", SSN, "XXX-XX-0947"),
    ("employer_id_number", "12-3456789", "XX-XXX6789"),
]


@pytest.mark.parametrize(("type_", "data", "shown"), MASKED, ids=[m[0] for m in MASKED])
async def test_default_mask_is_what_a_masking_application_reads(api, masking, type_, data,
                                                                 shown):
    created = await api.create({"type": type_, "data": data})
    assert (await api.get(created["id"], headers=masking))["data"] == shown


async def test_card_default_fingerprint_is_the_number(api):
    first = await api.create(card(VISA, expiration_month=1, expiration_year=2030))
    second = await api.create(card(VISA, expiration_month=2, expiration_year=2031))
    assert first["fingerprint_expression"] == "{{ data.number }}"
    assert first["fingerprint"] == second["fingerprint"]


async def test_ssn_default_fingerprint_ignores_dashes(api):
    dashed = await api.create({"type": "social_security_number", "data": SSN})
    plain = await api.create({"type": "social_security_number", "data": SSN.replace("-", "")})
    assert dashed["fingerprint"] == plain["fingerprint"]


# --- fingerprints are keyed (docs/security.md) ----------------------------------------------------

async def test_fingerprint_is_a_keyed_hmac_per_tenant(api, other_tenant_api):
    import base64
    import hashlib

    ours = await api.create({"type": "card_number", "data": VISA})
    again = await api.create({"type": "card_number", "data": VISA})
    theirs = await other_tenant_api.create({"type": "card_number", "data": VISA})
    assert ours["fingerprint"] == again["fingerprint"]
    assert ours["fingerprint"] != theirs["fingerprint"]
    plain = hashlib.sha256(VISA.encode()).digest()
    assert ours["fingerprint"] not in (plain.hex(),
                                      base64.urlsafe_b64encode(plain).rstrip(b"=").decode())


async def test_fingerprint_follows_the_fingerprint_expression(api):
    a = await api.create({"type": "token", "data": {"k": "v", "n": 1},
                          "fingerprint_expression": "{{ data.k }}"})
    b = await api.create({"type": "token", "data": {"k": "v", "n": 2},
                          "fingerprint_expression": "{{ data.k }}"})
    c = await api.create({"type": "token", "data": {"k": "v", "n": 2}})
    assert a["fingerprint"] == b["fingerprint"] != c["fingerprint"]


async def test_fingerprint_expression_may_use_metadata(api):
    a = await api.create({"type": "token", "data": "x", "metadata": {"org": "a"},
                          "fingerprint_expression": "{{ data }}-{{ metadata.org }}"})
    b = await api.create({"type": "token", "data": "x", "metadata": {"org": "b"},
                          "fingerprint_expression": "{{ data }}-{{ metadata.org }}"})
    assert a["fingerprint"] != b["fingerprint"]


# --- expressions: id, mask, search_indexes, fingerprint_expression ---------------------------

async def test_id_expression_alias_preserve_format(api):
    body = await api.create({"id": "{{ data | alias_preserve_format }}",
                             "type": "card_number", "data": VISA})
    assert re.fullmatch(r"[0-9]{16}", body["id"])
    assert body["id"] != VISA
    assert (await api.get(body["id"]))["data"] == VISA


async def test_id_expression_over_an_object(api):
    body = await api.create({"id": "tok_{{ data.number | alias_card }}", **card(MASTERCARD)})
    assert re.fullmatch(r"tok_555555[0-9]{6}4444", body["id"])


async def test_id_expression_rendering_a_bad_id_is_400_naming_id(api):
    # The rendered id must obey the id rules too: `/` is not allowed.
    assert_names(await api.create({"id": "{{ data }}", "type": "token", "data": "a/b/c"},
                                  expect=400), "id")


@pytest.mark.parametrize("field", ["id", "fingerprint_expression", "mask"])
@pytest.mark.parametrize("expression", ["{{ data | no_such_filter }}", "{{ data ", "{% if %}"])
async def test_bad_expression_is_400_naming_the_field(api, field, expression):
    body = {"type": "token", "data": "x", field: expression}
    assert_names(await api.create(body, expect=400), field)


async def test_bad_search_index_is_400_naming_search_indexes(api):
    problem = await api.create({"type": "token", "data": "x",
                                "search_indexes": ["{{ data }}", "{{ data | nope }}"]},
                               expect=400)
    assert any(name.startswith("search_indexes") for name in problem["errors"])


async def test_bad_mask_inside_a_structure_is_400_naming_mask(api):
    problem = await api.create({"type": "token", "data": {"a": "b"},
                                "mask": {"a": "{{ data.a | nope }}"}}, expect=400)
    assert_names(problem, "mask")


async def test_mask_string_expression_applies_to_masking_readers(api, masking):
    created = await api.create({"type": "token", "data": "abcdef1234",
                                "mask": "{{ data | reveal_last: 4 }}"})
    assert created["mask"] == "{{ data | reveal_last: 4 }}"
    assert (await api.get(created["id"], headers=masking))["data"] == "XXXXXX1234"


async def test_mask_structure_applies_to_masking_readers(api, masking):
    created = await api.create({
        "type": "token", "data": {"name": "Ada Lovelace", "phone": "5551234567", "n": 3},
        "mask": {"name": "{{ data.name | reveal: 1, 0 }}",
                 "phone": "{{ data.phone | last4 }}", "fixed": 7}})
    shown = (await api.get(created["id"], headers=masking))["data"]
    assert shown == {"name": "AXXXXXXXXXXX", "phone": "4567", "fixed": 7}


async def test_token_without_mask_reads_redacted_under_mask(api, masking):
    created = await api.create({"type": "token", "data": "secret"})
    shown = await api.get(created["id"], headers=masking)
    assert "data" not in shown and "mask" not in shown


async def test_fingerprint_expression_rendering_empty_is_400(api):
    assert_names(await api.create({"type": "token", "data": {"a": 1},
                                   "fingerprint_expression": "{{ data.missing }}"},
                                  expect=400), "fingerprint_expression")


@pytest.mark.parametrize("data", ["", "  "])
async def test_data_that_its_types_fingerprint_renders_empty_is_400_naming_data(api, data):
    """The caller wrote no expression: what is empty is its data (the default fingerprint,
    `{{ data | stringify }}`, renders a string as itself)."""
    problem = await api.create({"type": "token", "data": data}, expect=400)
    assert problem["errors"] == {"data": ["must not be empty: its fingerprint would be"]}


# --- docs/security.md: who may create, and the create response's transform -----------------

async def test_create_without_token_create_is_403(api, app_headers):
    reader = await app_headers(rule("/", "reveal", ["token:read"]), permissions=["token:read"])
    await api.create({"type": "token", "data": "x"}, headers=reader, expect=403)


async def test_create_outside_the_callers_containers_is_403(api, app_headers):
    pci = await app_headers(rule("/pci/", "reveal", ["token:create", "token:read"]))
    await api.create(card(), headers=pci)
    await api.create({"type": "token", "data": "x"}, headers=pci, expect=403)


async def test_create_response_applies_the_callers_transform(api, masking, redacting):
    masked = await api.create(card(VISA), headers=masking)
    assert masked["data"]["number"] == "424242XXXXXX4242"
    redacted = await api.create(card(VISA), headers=redacting)
    assert "data" not in redacted and "mask" not in redacted
    assert redacted["fingerprint_expression"] == "{{ data.number }}"


async def test_the_create_answer_is_what_a_get_answers(api):
    """The answer shows the token as stored: field for field what a get of it answers, with
    every optional field set and with none."""
    full = await api.create({**card(), "metadata": {"customer": "c-1", "Region": "EU"},
                             "search_indexes": ["{{ data.number | last4 }}"],
                             "expires_at": "2031-05-06T07:08:09.123456+02:00",
                             "containers": ["/cards/eu/"],
                             "fingerprint_expression": "{{ data.number }}"})
    bare = await api.create({"type": "token", "data": ["x", 1]})
    for body in (full, bare):
        assert body == await api.get(body["id"])
    assert full["expires_at"] and "expires_at" not in bare


async def test_create_stores_one_node_with_the_given_id(api, client, tenant):
    await api.create({"id": "only-one", "type": "token", "data": "x"})
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: 'only-one'}) "
                                "RETURN count(t) AS n", t=tenant.tenant_id)
    assert rows == [{"n": 1}]


# --- id and metadata are not sensitive -----------------------------------------------------

async def test_id_and_metadata_are_kept_in_the_clear_for_every_reader(api, client, tenant,
                                                                      redacting):
    # Callers must keep secrets out of them: unlike data and mask they are stored unencrypted
    # (they are filtered on) and shown to every reader, a redacting one too.
    created = await api.create({"id": "order-5531", "type": "token", "data": "secret",
                                "metadata": {"Order": "5531"}})
    seen = await api.get(created["id"], headers=redacting)
    assert seen["id"] == "order-5531" and seen["metadata"] == {"Order": "5531"}
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: 'order-5531'}) "
                                "RETURN t.metadata AS m", t=tenant.tenant_id)
    assert "5531" in rows[0]["m"]
