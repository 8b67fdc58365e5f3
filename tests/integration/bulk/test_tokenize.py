"""POST /tokenize (docs/bulk-and-idempotency.md): many create requests, each answered in its
place."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import orjson
import pytest
from factories import audit_tenant, audit_tokens

from vaultgraph.api.typedefs import services_key
from vaultgraph.audit.ids import route_number
from vaultgraph.errors import MAX_FIELD_NAME, MAX_LISTED_ERRORS

from ._support import (
    AMEX,
    CALLER_WRITTEN,
    MASTERCARD,
    ROUTING,
    VISA,
    application,
    call,
    card,
    cypher,
    rule,
    token_count,
)


async def tokenize(client, headers, body, expect=200):
    return (await call(client, "POST", "/tokenize", headers, json=body, expect=expect))[1]


async def test_an_array_gives_an_array_of_created_tokens_stored_as_created(
        client, admin_headers, tenant):
    answer = await tokenize(client, admin_headers, [
        card(VISA, metadata={"customer": "c-1"}), card(MASTERCARD),
        {"type": "token", "data": {"name": "Ada"}, "id": "ada"}])
    assert [a["data"] for a in answer] == [
        {"number": VISA}, {"number": MASTERCARD}, {"name": "Ada"}]
    assert answer[2]["id"] == "ada" and answer[0]["metadata"] == {"customer": "c-1"}
    assert {a["created_by"] for a in answer} == {tenant.application_id}
    for item in answer:
        _, read = await call(client, "GET", f"/tokens/{item['id']}", admin_headers)
        assert read["data"] == item["data"]
    # Plaintext never reaches Neo4j.
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t}) RETURN properties(t) AS p",
                        t=tenant.tenant_id)
    assert len(rows) == 3
    stored = str(rows)
    assert VISA not in stored and "Ada" not in stored
    # The metadata filter (index-backed HAS_META entries) finds the bulk-made token.
    _, page = await call(client, "GET", "/tokens?metadata.customer=C-1", admin_headers)
    assert [t["id"] for t in page["data"]] == [answer[0]["id"]]


async def test_each_created_item_is_what_a_get_answers(client, admin_headers):
    """Each created item shows the token as stored (what a get of it answers), a dedup match
    too."""
    first = await tokenize(client, admin_headers, [card(AMEX, deduplicate_token=True)])
    answer = await tokenize(client, admin_headers, [
        card(VISA, metadata={"customer": "c-1"}, expires_at="2031-05-06T07:08:09+02:00",
             search_indexes=["{{ data.number | last4 }}"]),
        {"type": "token", "data": {"name": "Ada"}},
        card(AMEX, deduplicate_token=True)])
    assert answer[2]["id"] == first[0]["id"]
    assert answer[2]["_extras"] == {"deduplicated": True}
    for item in answer:
        _, read = await call(client, "GET", f"/tokens/{item['id']}", admin_headers)
        assert {k: v for k, v in item.items() if k != "_extras"} == read
    assert answer[0]["expires_at"] and "expires_at" not in answer[1]


async def test_the_valid_items_are_written_by_one_statement(client, admin_headers, tenant):
    """datetime() is fixed for a statement: one created_at for all means one write."""
    answer = await tokenize(client, admin_headers, [card(VISA), card(MASTERCARD), card(AMEX)])
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t}) RETURN DISTINCT t.created_at",
                        t=tenant.tenant_id)
    assert len(rows) == 1 and len(answer) == 3


async def test_an_object_gives_an_object_with_the_same_keys(client, admin_headers):
    answer = await tokenize(client, admin_headers, {
        "card": card(VISA), "name": {"type": "token", "data": "Ada"}})
    assert set(answer) == {"card", "name"}
    assert answer["card"]["type"] == "card" and answer["name"]["data"] == "Ada"


async def test_items_fail_alone_and_nothing_of_them_is_written(client, admin_headers, tenant):
    answer = await tokenize(client, admin_headers, [
        card("4242424242424241"), card(VISA), "not an object", {"type": "nope", "data": 1},
        {"type": "token"}])
    bad_luhn, good, not_object, bad_type, no_data = answer
    assert good["data"] == {"number": VISA}
    assert bad_luhn["status"] == 400 and "data.number" in bad_luhn["errors"]
    assert "4242424242424241" not in orjson.dumps(bad_luhn).decode()
    assert (not_object["status"], not_object["detail"]) == (
        400, "The item must be a create request (a JSON object).")
    assert "errors" not in not_object  # as POST /tokens answers a body that is not an object
    assert bad_type["status"] == 400 and "type" in bad_type["errors"]
    assert no_data["status"] == 400 and "data" in no_data["errors"]
    assert await token_count(client, tenant.tenant_id) == 1


async def test_when_no_item_is_created_the_answer_is_one_problem_naming_each(
        client, admin_headers, tenant):
    _, problem = await call(client, "POST", "/tokenize", admin_headers, expect=400, json={
        "a": card("4242424242424241"), "b": {"type": "token"}})
    assert problem["errors"] == {"a.data.number": problem["errors"]["a.data.number"],
                                 "b.data": ["Missing data for required field."]}
    # an item that is not an object is named by its place alone, like a 403 or a 409
    _, problem = await call(client, "POST", "/tokenize", admin_headers, expect=400, json=[
        {"type": "token"}, "not an object", 42])
    assert problem["errors"] == {
        "0.data": ["Missing data for required field."],
        "1": ["The item must be a create request (a JSON object)."],
        "2": ["The item must be a create request (a JSON object)."]}
    assert await token_count(client, tenant.tenant_id) == 0


async def test_container_rights_hold_per_item(client, admin_headers, tenant):
    bank_only = await application(client, admin_headers, rule("/bank/", "reveal"))
    answer = await tokenize(client, bank_only, [
        card(VISA), {"type": "bank", "data": {"routing_number": ROUTING,
                                              "account_number": "123456"}}])
    assert answer[0]["status"] == 403
    assert answer[1]["data"]["routing_number"] == ROUTING
    assert await token_count(client, tenant.tenant_id) == 1


async def test_an_id_taken_or_repeated_is_a_409_in_its_place(client, admin_headers, tenant):
    await tokenize(client, admin_headers, [{"id": "taken", "type": "token", "data": 1}])
    answer = await tokenize(client, admin_headers, [
        {"id": "taken", "type": "token", "data": 2}, {"id": "twice", "type": "token", "data": 3},
        {"id": "twice", "type": "token", "data": 4}, {"id": "fresh", "type": "token", "data": 5}])
    assert [a.get("status") for a in answer] == [409, None, 409, None]
    _, taken = await call(client, "GET", "/tokens/taken", admin_headers)
    _, twice = await call(client, "GET", "/tokens/twice", admin_headers)
    assert (taken["data"], twice["data"]) == (1, 3)


async def test_dedup_matches_earlier_tokens_and_earlier_items(client, admin_headers, tenant):
    first = await tokenize(client, admin_headers, [card(VISA, deduplicate_token=True)])
    answer = await tokenize(client, admin_headers, [
        card(VISA, deduplicate_token=True), card(AMEX, deduplicate_token=True),
        card(AMEX, deduplicate_token=True)])
    assert answer[0]["id"] == first[0]["id"] and answer[0]["_extras"] == {"deduplicated": True}
    assert answer[2]["id"] == answer[1]["id"] and answer[2]["_extras"] == {"deduplicated": True}
    assert await token_count(client, tenant.tenant_id) == 2


async def test_bad_shapes_are_400s_naming_the_body(client, admin_headers, tenant):
    for body in ([], {}, "cards", 42, None, [card(VISA)] * 101):
        _, problem = await call(client, "POST", "/tokenize", admin_headers, expect=400,
                                data=orjson.dumps(body))
        assert list(problem["errors"]) == ["body"], body
    assert await token_count(client, tenant.tenant_id) == 0


async def test_an_integer_beyond_64_bits_is_400_naming_its_place(client, admin_headers,
                                                                 tenant):
    body = orjson.dumps([card(VISA), {"type": "token", "data": {"n": 1}}])
    body = body.replace(b'"n":1', b'"n":98765432109876543210')
    _, problem = await call(client, "POST", "/tokenize", admin_headers, expect=400, data=body)
    assert list(problem["errors"]) == ["1.data.n"]
    assert await token_count(client, tenant.tenant_id) == 0


async def test_a_10_mb_payload_is_413(client, admin_headers, tenant):
    body = orjson.dumps([{"type": "token", "data": "x" * (10 * 1024 * 1024)}])
    await call(client, "POST", "/tokenize", admin_headers, data=body, expect=413)
    assert await token_count(client, tenant.tenant_id) == 0


async def test_the_audit_event_names_every_token_created(client, admin_headers, tenant):
    answer = await tokenize(client, admin_headers, [card(VISA), card(MASTERCARD)])
    rows = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr, "
                                "route: $route}) RETURN properties(e) AS p",
                        **audit_tenant(tenant.tenant_id), route=route_number("POST /tokenize"))
    assert [sorted(audit_tokens(r["p"])) for r in rows] == [sorted(a["id"] for a in answer)]


async def test_an_item_s_expiry_is_stored_as_the_datetime_given(client, admin_headers, tenant):
    """As tokens/create: the expiry travels as text and is stored as a zoned DateTime."""
    await tokenize(client, admin_headers, [
        {"type": "token", "data": {"n": "1"}, "id": "tx-1",
         "expires_at": "2031-05-06T07:08:09.654321-03:30"},
        {"type": "token", "data": {"n": "2"}, "id": "tx-2"}])
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t}) RETURN t.id AS id, "
                                "t.expires_at AS at, valueType(t.expires_at) AS type ORDER BY id",
                        t=tenant.tenant_id)
    assert [(r["id"], r["type"]) for r in rows] == [("tx-1", "ZONED DATETIME NOT NULL"),
                                                    ("tx-2", "NULL")]
    assert rows[0]["at"].to_native() == datetime(2031, 5, 6, 10, 38, 9, 654321, tzinfo=UTC)


async def test_an_error_list_is_bounded_however_many_fields_fail(client, admin_headers, tenant):
    # One item under a 10,000-character key with 20,000 unknown fields: each error is named
    # by the key and the field, and without a bound the answer was 200 MB.
    body = {"p" * 10_000: {**card(VISA), **{f"u{i}": 0 for i in range(20_000)}}}
    _, problem = await call(client, "POST", "/tokenize", admin_headers, expect=400,
                            data=orjson.dumps(body))
    assert 0 < len(problem["errors"]) <= MAX_LISTED_ERRORS
    assert all(len(name) <= MAX_FIELD_NAME for name in problem["errors"])
    assert len(orjson.dumps(problem)) < 64_000
    assert await token_count(client, tenant.tenant_id) == 0


@pytest.mark.parametrize("caller_written", CALLER_WRITTEN)
async def test_items_with_caller_written_expressions_are_prepared_off_the_event_loop(
        client, admin_headers, tenant, monkeypatch, caller_written):
    """A batch with an expression its caller wrote prepares every item on the renderer's
    threads; one that renders only its types' own expressions prepares inline, as a single
    create does."""
    tokens = client.server.app[services_key].bulk.tokens
    prepared_on: list[str] = []
    prepare = tokens.prepare

    def recording_prepare(principal, body):
        prepared_on.append(threading.current_thread().name)
        return prepare(principal, body)

    monkeypatch.setattr(tokens, "prepare", recording_prepare)
    loop_thread = threading.current_thread().name
    await tokenize(client, admin_headers, [card(VISA), card(MASTERCARD)])
    assert prepared_on == [loop_thread, loop_thread]
    prepared_on.clear()
    await tokenize(client, admin_headers, [card(AMEX), card(MASTERCARD, **caller_written)])
    assert len(prepared_on) == 2
    assert all(name.startswith("vaultgraph-render") for name in prepared_on), prepared_on
