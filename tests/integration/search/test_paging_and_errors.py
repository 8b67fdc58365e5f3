"""Pages, limits and refusals: newest first across pages (ties broken by id), each bound a 400
naming the field, a malformed query a 400 naming the position and the problem, never echoing
the query's values."""

from __future__ import annotations

import base64
import dataclasses

import orjson
import pytest
from graph._support import PROBLEM_JSON, VISA, GraphApi, card, customer, cypher

from vaultgraph.app import create_app
from vaultgraph.search.plan import UNINDEXED

from .conftest import every, found, search


async def problem(api, body: dict, status: int = 400) -> dict:
    resp = await api.client.post("/tokens/search", json=body, headers=api.headers)
    assert resp.status == status, await resp.text()
    assert resp.content_type == PROBLEM_JSON
    return await resp.json(content_type=None)


async def test_pages_follow_the_cursor_newest_first(api):
    ids = [f"tok-{i:02d}" for i in range(7)]
    for token_id in ids:
        await api.create(customer(id=token_id, metadata={"batch": "b"}))
    newest_first = ids[::-1]
    assert await found(api, "metadata.batch:b") == newest_first
    for size in (1, 2, 3, 7, 100):
        assert await every(api, "metadata.batch:b", size) == newest_first
    last = await search(api, "metadata.batch:b", size=7)
    assert last["pagination"] == {"page_size": 7, "next": None}
    assert (await search(api, "metadata.batch:b"))["pagination"]["page_size"] == 20


async def test_equal_creation_times_are_ordered_by_id(api):
    for token_id in ("tie-a", "tie-b", "tie-c", "tie-d"):
        created = await api.create(customer(id=token_id, metadata={"batch": "t"}))
    await cypher(api.client, "MATCH (t:Token {tenant_id: $t}) SET t.created_at = "
                             "datetime('2026-01-01T00:00:00.123456789Z')",
                 t=created["tenant_id"])
    assert await every(api, "metadata.batch:t", 1) == ["tie-d", "tie-c", "tie-b", "tie-a"]
    assert await every(api, "metadata.batch:t", 3) == ["tie-d", "tie-c", "tie-b", "tie-a"]


@pytest.mark.parametrize("start", [
    "!!!", base64.urlsafe_b64encode(b'"tok-1"').decode(),
    base64.urlsafe_b64encode(orjson.dumps(["2026-13-45T00:00:00Z", "x"])).decode(),
    base64.urlsafe_b64encode(orjson.dumps(["nope", "x"])).decode(),
    base64.urlsafe_b64encode(orjson.dumps([1, 2])).decode()])
async def test_a_forged_cursor_is_refused(api, start):
    body = await problem(api, {"query": "type:card", "start": start})
    assert body["errors"] == {"start": ["is not a cursor this service issued"]}


@pytest.mark.parametrize(("body", "field"), [
    ({"query": "type:card", "size": 0}, "size"),
    ({"query": "type:card", "size": 101}, "size"),
    ({"query": "type:card", "size": "5"}, "size"),
    ({"query": "type:card", "size": True}, "size"),
    ({"size": 5}, "query"),
    ({"query": 5}, "query"),
    ({"query": "type:card", "extra": 1}, "extra"),
    ({"query": ""}, "query"),
    ({"query": "   "}, "query"),
])
async def test_bad_bodies_name_the_field(api, body, field):
    assert list((await problem(api, body))["errors"]) == [field]


async def test_limits_are_settings(aiohttp_client, settings, admin_headers):
    custom = dataclasses.replace(settings, search_max_query_length=20, search_max_terms=2,
                                 search_max_depth=2)
    api = GraphApi(await aiohttp_client(create_app(custom)), admin_headers)
    assert (await problem(api, {"query": "id:" + "x" * 18}))["errors"] == {
        "query": ["must be at most 20 characters"]}
    # Token ids are 3 characters or more (a shorter one is refused as no id).
    assert (await problem(api, {"query": "id:aaa id:bbb id:ccc"}))["errors"] == {
        "query": ["must hold at most 2 terms"]}
    assert (await problem(api, {"query": "NOT (id:aaa id:bbb)"}))["errors"] == {
        "query": ["nests at most 2 levels deep"]}
    assert await found(api, "id:aaa OR id:bbb") == []


async def test_default_limits(api):
    long_query = "id:" + "x" * 1998
    assert len(long_query) == 2001
    assert (await problem(api, {"query": long_query}))["errors"] == {
        "query": ["must be at most 2000 characters"]}
    many = " OR ".join(f"id:t{i:02}" for i in range(21))
    assert (await problem(api, {"query": many}))["errors"] == {
        "query": ["must hold at most 20 terms"]}
    assert await found(api, " OR ".join(f"id:t{i:02}" for i in range(20))) == []
    deep = "id:aaa AND (id:bbb OR (id:ccc AND (id:ddd OR (id:eee AND (id:fff OR id:ggg)))))"
    assert (await problem(api, {"query": deep}))["errors"] == {
        "query": ["nests at most 6 levels deep"]}


@pytest.mark.parametrize(("query", "message"), [
    ("type:", "position 6: the query ends too early (a term, value or `)` is missing)"),
    ("4242424242424242", "position 1: expected a term `field:value`"),
    ("type:card 4242424242424242", "position 11: expected a term `field:value`"),
    ("(type:card", "position 11: the query ends too early (a term, value or `)` is missing)"),
    ("type:card)", "position 10: unexpected `)`"),
    ("AND type:card", "position 1: unexpected `AND`"),
    ("type:card OR OR id:x", "position 14: unexpected `OR`"),
    ('data:"4242424242424242', "position 6: unexpected character"),
    ("created_at:[2026-01-01 2027-01-01]", "position 24: expected `TO` in the range"),
    ("created_at:[* *]", "position 15: expected `TO` in the range"),
    ("created_at:[2026-01-01 TO 4242424242424242]",
     "position 27: `created_at` takes an ISO 8601 date (2026-11-23) or date-time "
     "(2026-11-23T10:00:00Z) from year 1 to 9999"),
    ("expires_at:[9999-12-31T23:59:59-14:00 TO *]",
     "position 13: `expires_at` takes an ISO 8601 date (2026-11-23) or date-time "
     "(2026-11-23T10:00:00Z) from year 1 to 9999"),
    ("type:[2026-01-01 TO *]",
     "position 1: `type` does not take a range (only created_at and expires_at do)"),
    ('id:""', "position 1: `id` needs a value"),
    ("container:pci", "position 1: `container` takes a path that starts with `/`"),
    ("type:card AND colour:red",
     "position 15: unknown field `colour`; the fields are id, type, container, fingerprint, "
     "data, metadata.<key>, created_at, expires_at, parent, child, ancestor, descendant"),
    ("type:card AND card.4242424242424242:x",
     "position 15: unknown field `card.…`; the fields are id, type, container, fingerprint, "
     "data, metadata.<key>, created_at, expires_at, parent, child, ancestor, descendant"),
    ("container:/pci/", UNINDEXED),
    ("NOT type:card", UNINDEXED),
    ("type:card OR NOT id:xyz", UNINDEXED),
    ("type:card OR container:/pci/", UNINDEXED),
])
async def test_malformed_queries_name_the_position_and_the_problem(api, query, message):
    body = await problem(api, {"query": query})
    assert body["errors"] == {"query": [message]}
    assert "4242424242" not in orjson.dumps(body).decode()


async def test_the_ends_of_time_are_answered(api):
    await api.create(card(VISA, id="card-pci"))
    for query in ("created_at:9999-12-31", "created_at:0001-01-01",
                  "created_at:[0001-01-01T00:00:00Z TO 9999-12-31T23:59:59.999999Z]"):
        await search(api, query)


async def test_unindexed_parts_may_narrow_an_indexed_query(api):
    await api.create(card(VISA, id="card-pci"))
    assert await found(api, "type:card AND container:/pci/ AND NOT id:other") == ["card-pci"]
