"""List Tokens (GET /tokens): filters, cursor pagination and read transforms
(docs/tokens-and-expressions.md, "Listing")."""

from __future__ import annotations

import asyncio
import base64
import dataclasses

import pytest

from vaultgraph.app import create_app

from ._support import VISA, assert_names, card, rule


@pytest.fixture
def app(settings):
    """Listings at volume: 1,000 creates, ten at a time, outrun the per-application rate limit
    (200/s after a burst of 400) on a fast enough machine, and the limit is not under test
    here (tests/integration/bulk/test_rate_limits.py)."""
    return create_app(dataclasses.replace(settings, rate_limit=0), schema_applied=True)


async def make_many(api, bodies: list[dict], batch: int = 10) -> list[dict]:
    """Create through the API, `batch` requests at a time (few enough that their fingerprint
    renders, two threads' worth, stay well inside the render budget on a busy machine)."""
    out: list[dict] = []
    for i in range(0, len(bodies), batch):
        out += await asyncio.gather(*(api.create(b) for b in bodies[i:i + batch]))
    return out


async def test_list_answers_pagination_and_data(api):
    created = await api.create({"type": "token", "data": "x"})
    body = await api.list()
    assert set(body) == {"pagination", "data"}
    assert body["pagination"] == {"page_size": 20, "next": None}
    assert [t["id"] for t in body["data"]] == [created["id"]]
    assert body["data"][0]["data"] == "x"


async def test_list_of_an_empty_tenant_is_empty(api):
    assert await api.list() == {"pagination": {"page_size": 20, "next": None}, "data": []}


async def test_default_page_size_is_20(api):
    await make_many(api, [{"type": "token", "data": i} for i in range(21)])
    first = await api.list()
    assert len(first["data"]) == 20
    assert first["pagination"]["next"] is not None
    second = await api.list({"start": first["pagination"]["next"]})
    assert len(second["data"]) == 1
    assert second["pagination"]["next"] is None


async def test_size_sets_the_page_size(api):
    await make_many(api, [{"type": "token", "data": i} for i in range(5)])
    page = await api.list({"size": "2"})
    assert page["pagination"]["page_size"] == 2
    assert len(page["data"]) == 2


async def test_size_of_100_is_allowed(api):
    assert (await api.list({"size": "100"}))["pagination"]["page_size"] == 100


@pytest.mark.parametrize("size", ["101", "0", "-1", "abc", "1.5", ""])
async def test_size_outside_1_to_100_is_400_naming_size(api, size):
    assert_names(await api.list({"size": size}, expect=400), "size")


@pytest.mark.parametrize(("query", "named"), [
    ([("types", "card")], "types"),  # a misspelt filter would have listed every token
    ([("bogus", "1")], "bogus"),
    ([("size", "1"), ("size", "2")], "size"),
    ([("start", "a"), ("start", "b")], "start"),
])
async def test_an_undeclared_or_repeated_single_parameter_is_a_400_naming_it(api, query, named):
    await api.create({"type": "token", "data": "x"})
    assert_names(await api.list(query, expect=400), named)


async def test_repeatable_parameters_and_metadata_filters_are_still_taken(api):
    one = await api.create({"type": "token", "data": "x", "metadata": {"k": "v"}})
    two = await api.create({"type": "token", "data": "y"})
    assert set(await api.ids([("id", one["id"]), ("id", two["id"])])) == {one["id"], two["id"]}
    assert await api.ids([("type", "token"), ("type", "card"), ("metadata.k", "v")]) == [
        one["id"]]


def _b64(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode()


@pytest.mark.parametrize("cursor", ["!!!", "a", "%%%", _b64(b"not json"), _b64(b"123"),
                                    _b64(b"[1,2]"), _b64(b"null"), _b64(b'{"a":1}'),
                                    "\u00e9t\u00e9"])
async def test_malformed_cursor_is_400_naming_start(api, cursor):
    assert_names(await api.list({"start": cursor}, expect=400), "start")


async def test_pages_follow_id_order_without_gaps_or_repeats(api):
    created = await make_many(api, [{"type": "token", "data": i} for i in range(23)])
    ids = await api.ids(size=5)
    assert ids == sorted(t["id"] for t in created)


# --- filters ---------------------------------------------------------------------------------

async def test_filter_by_one_id(api):
    a = await api.create({"type": "token", "data": "a"})
    await api.create({"type": "token", "data": "b"})
    assert await api.ids([("id", a["id"])]) == [a["id"]]


async def test_filter_by_repeated_id(api):
    tokens = await make_many(api, [{"type": "token", "data": i} for i in range(4)])
    wanted = sorted([tokens[0]["id"], tokens[2]["id"]])
    assert await api.ids([("id", wanted[1]), ("id", wanted[0]), ("id", "no-such")]) == wanted


async def test_repeated_id_value_lists_the_token_once(api):
    a = await api.create({"type": "token", "data": "a"})
    assert await api.ids([("id", a["id"]), ("id", a["id"])]) == [a["id"]]


async def test_filter_by_type(api):
    c = await api.create(card())
    await api.create({"type": "token", "data": "x"})
    assert await api.ids([("type", "card")]) == [c["id"]]


async def test_filter_by_repeated_type(api):
    c = await api.create(card())
    n = await api.create({"type": "card_number", "data": VISA})
    await api.create({"type": "token", "data": "x"})
    assert await api.ids([("type", "card"), ("type", "card_number")]) == sorted(
        [c["id"], n["id"]])


async def test_repeated_type_value_lists_each_token_once(api):
    c = await api.create(card())
    assert await api.ids([("type", "card"), ("type", "card")]) == [c["id"]]


async def test_unknown_type_filter_matches_nothing(api):
    await api.create({"type": "token", "data": "x"})
    assert await api.ids([("type", "passport")]) == []


async def test_metadata_filter_is_exact(api):
    hit = await api.create({"type": "token", "data": 1, "metadata": {"colour": "red"}})
    await api.create({"type": "token", "data": 2, "metadata": {"colour": "reddish"}})
    await api.create({"type": "token", "data": 3, "metadata": {"shade": "red"}})
    await api.create({"type": "token", "data": 4})
    assert await api.ids([("metadata.colour", "red")]) == [hit["id"]]


async def test_metadata_filter_is_case_insensitive(api):
    hit = await api.create({"type": "token", "data": 1, "metadata": {"Colour": "Red"}})
    assert await api.ids([("metadata.colour", "RED")]) == [hit["id"]]
    assert await api.ids([("metadata.COLOUR", "red")]) == [hit["id"]]


async def test_keys_differing_only_by_case_list_the_token_once(api):
    body = {"type": "token", "data": 1, "metadata": {"Colour": "Red", "colour": "red"}}
    hit = await api.create(body)
    assert await api.ids([("metadata.colour", "red")]) == [hit["id"]]
    page = await api.list([("metadata.colour", "red"), ("size", "1")])
    assert [t["id"] for t in page["data"]] == [hit["id"]]
    assert page["pagination"]["next"] is None
    patched = await api.create({"type": "token", "data": 2})
    await api.patch(patched["id"], {"metadata": {"Shade": "Blue", "SHADE": "blue"}})
    assert await api.ids([("metadata.shade", "blue")]) == [patched["id"]]


async def test_a_filter_key_with_a_control_character_is_refused(api, client, admin_headers):
    # Stored keys hold none; one in a filter could reach across the key-value separator
    # (U+001F) into a value that holds it: {"a": "x\u001fy"} matched metadata.a\u001fx=y.
    await api.create({"type": "token", "data": 1, "metadata": {"a": "x\u001fy"}})
    resp = await client.get("/tokens", params={"metadata.a\u001fx": "y"}, headers=admin_headers)
    assert resp.status == 400, await resp.text()
    # Named `metadata`: the key is what is wrong, and is not echoed (tests/integration/refusals).
    assert list((await resp.json(content_type=None))["errors"]) == ["metadata"]


async def test_metadata_values_keep_their_case(api):
    await api.create({"type": "token", "data": 1, "metadata": {"Colour": "Red"}})
    listed = await api.list([("metadata.colour", "red")])
    assert listed["data"][0]["metadata"] == {"Colour": "Red"}


async def test_several_metadata_filters_are_anded(api):
    both = await api.create({"type": "token", "data": 1, "metadata": {"a": "1", "b": "2"}})
    await api.create({"type": "token", "data": 2, "metadata": {"a": "1", "b": "3"}})
    await api.create({"type": "token", "data": 3, "metadata": {"a": "1"}})
    assert await api.ids([("metadata.a", "1"), ("metadata.b", "2")]) == [both["id"]]


async def test_repeated_metadata_key_is_ignored(api):
    red = await api.create({"type": "token", "data": 1, "metadata": {"colour": "red"}})
    await api.create({"type": "token", "data": 2, "metadata": {"colour": "blue"}})
    # The first value of a key counts; a repeat of the key changes nothing.
    assert await api.ids([("metadata.colour", "red"), ("metadata.colour", "blue")]) == [
        red["id"]]
    assert await api.ids([("metadata.colour", "red"), ("metadata.Colour", "blue")]) == [
        red["id"]]


async def test_metadata_filter_with_separator_like_characters(api):
    # Keys and values are free text: no pair may be confused with another.
    a = await api.create({"type": "token", "data": 1, "metadata": {"a=b": "c"}})
    b = await api.create({"type": "token", "data": 2, "metadata": {"a": "b=c"}})
    assert await api.ids([("metadata.a=b", "c")]) == [a["id"]]
    assert await api.ids([("metadata.a", "b=c")]) == [b["id"]]


async def test_filters_combine(api):
    a = await api.create({**card(), "metadata": {"team": "x"}})
    b = await api.create({"type": "token", "data": 1, "metadata": {"team": "x"}})
    await api.create({**card(), "metadata": {"team": "y"}})
    assert await api.ids([("type", "card"), ("metadata.team", "x")]) == [a["id"]]
    assert await api.ids([("id", a["id"]), ("id", b["id"]), ("type", "token")]) == [b["id"]]
    assert await api.ids([("id", a["id"]), ("metadata.team", "y")]) == []


async def test_pagination_within_a_filter(api):
    tokens = await make_many(api, [{"type": "token", "data": i, "metadata": {"g": str(i % 2)}}
                                   for i in range(12)])
    even = sorted(t["id"] for t in tokens if t["metadata"]["g"] == "0")
    assert await api.ids([("metadata.g", "0")], size=2) == even
    odd_types = sorted(t["id"] for t in tokens)
    assert await api.ids([("type", "token")], size=5) == odd_types
    assert await api.ids([("id", i) for i in even], size=4) == even


# --- transforms and access ------------------------------------------------------------------

async def test_list_applies_each_callers_transform(api, masking, redacting, revealing):
    created = await api.create(card(VISA))
    [masked] = (await api.list(headers=masking))["data"]
    assert masked["data"]["number"] == "424242XXXXXX4242"
    [redacted] = (await api.list(headers=redacting))["data"]
    assert "data" not in redacted and "mask" not in redacted
    [revealed] = (await api.list(headers=revealing))["data"]
    assert revealed["data"]["number"] == VISA
    assert masked["id"] == redacted["id"] == revealed["id"] == created["id"]


async def test_list_shows_only_tokens_the_caller_may_read(api, bank_only):
    bank = await api.create({"type": "bank", "data": {"routing_number": "021000021",
                                                      "account_number": "123"}})
    await api.create(card())
    assert await api.ids(headers=bank_only) == [bank["id"]]
    assert await api.ids([("id", bank["id"])], headers=bank_only) == [bank["id"]]
    assert await api.ids([("type", "card")], headers=bank_only) == []


async def test_list_shows_only_the_callers_tenant(api, other_tenant_api):
    ours = await api.create({"type": "token", "data": 1, "metadata": {"k": "v"}})
    theirs = await other_tenant_api.create({"type": "token", "data": 1, "metadata": {"k": "v"}})
    assert await api.ids() == [ours["id"]]
    assert await api.ids([("metadata.k", "v")]) == [ours["id"]]
    assert await api.ids([("id", theirs["id"])]) == []
    assert await other_tenant_api.ids([("type", "token")]) == [theirs["id"]]


async def test_list_without_token_read_is_403(api, app_headers):
    writer = await app_headers(rule("/", "reveal", ["token:create"]), permissions=["token:create"])
    await api.list(headers=writer, expect=403)


async def test_cursor_is_opaque_text(api):
    await make_many(api, [{"type": "token", "data": i} for i in range(3)])
    cursor = (await api.list({"size": "1"}))["pagination"]["next"]
    assert isinstance(cursor, str)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    # A cursor from a later page still works after a token before it is deleted.
    first = (await api.list({"size": "1"}))["data"][0]["id"]
    await api.delete(first)
    rest = await api.list({"start": cursor, "size": "10"})
    assert len(rest["data"]) == 2


# --- ≥ 1,000 tokens --------------------------------------------------------------------------

@pytest.mark.slow
async def test_pagination_and_filters_over_1000_tokens(api):
    colours = ("red", "green", "blue", "Red")
    bodies = []
    for i in range(1000):
        body = {"type": ("token", "card_number")[i % 2],
                "data": VISA if i % 2 else {"n": i},
                "metadata": {"colour": colours[i % 4], "n": str(i)}}
        bodies.append(body)
    created = await make_many(api, bodies)
    everything = sorted(t["id"] for t in created)

    for size in (100, 37):
        ids = await api.ids(size=size)
        assert ids == everything  # stable order, no repeats, no gaps
    cards = sorted(t["id"] for t in created if t["type"] == "card_number")
    assert await api.ids([("type", "card_number")], size=100) == cards
    assert await api.ids([("type", "card_number"), ("type", "token")], size=64) == everything
    red = sorted(t["id"] for t in created if t["metadata"]["colour"].lower() == "red")
    assert len(red) == 500
    assert await api.ids([("metadata.colour", "RED")], size=100) == red
    red_cards = sorted(set(red) & set(cards))
    assert await api.ids([("metadata.colour", "red"), ("type", "card_number")],
                         size=30) == red_cards
    assert await api.ids([("metadata.colour", "red"), ("metadata.n", "4")]) == [
        next(t["id"] for t in created if t["metadata"]["n"] == "4")]
    assert await api.ids([("metadata.colour", "blue"), ("metadata.n", "4")]) == []
    some = everything[::7]
    assert await api.ids([("id", i) for i in some], size=50) == some
    # Pages of a listing never repeat a token, even while tokens are added between pages.
    page = await api.list({"size": "100"})
    seen = [t["id"] for t in page["data"]]
    await make_many(api, [{"type": "token", "data": i} for i in range(20)])
    start = page["pagination"]["next"]
    while start:
        page = await api.list({"size": "100", "start": start})
        seen += [t["id"] for t in page["data"]]
        start = page["pagination"]["next"]
    assert len(seen) == len(set(seen))
    assert set(everything) <= set(seen)

