"""Limits (docs/tokens-and-expressions.md, "Limits"): each exceeded limit is a clear 400 or 413
problem, never a 500. Page size and cursor limits are in test_list.py."""

from __future__ import annotations

import io

import orjson
import pytest

from ._support import MERGE_PATCH, PROBLEM_JSON, assert_names

# --- token id: 3 to 400 characters, no URL-significant characters ---------------------------

@pytest.mark.parametrize("length", [3, 400])
async def test_id_of_3_to_400_characters_is_accepted(api, length):
    token_id = "a" * length
    assert (await api.create({"id": token_id, "type": "token", "data": 1}))["id"] == token_id
    await api.get(token_id)


# One example per rule here; the full tables are unit tests (tests/unit/test_token_fields.py).
@pytest.mark.parametrize("length", [2, 401])
async def test_id_shorter_than_3_or_longer_than_400_is_400(api, length):
    assert_names(await api.create({"id": "a" * length, "type": "token", "data": 1},
                                  expect=400), "id")


@pytest.mark.parametrize("char", ["/", "%"])
async def test_id_with_a_forbidden_character_is_400(api, char):
    assert_names(await api.create({"id": f"ab{char}cd", "type": "token", "data": 1},
                                  expect=400), "id")


@pytest.mark.parametrize("token_id", ["has space", "zero\u200bwidth"])
async def test_id_with_whitespace_or_control_characters_is_400(api, token_id):
    assert_names(await api.create({"id": token_id, "type": "token", "data": 1}, expect=400),
                 "id")


@pytest.mark.parametrize("token_id", ["tok_1.2-3~x", "ÄÖÜ-ünicode", "a:b@c!d$e'f(g)h*i,j;k"])
async def test_id_with_other_characters_is_accepted_and_addressable(api, token_id):
    await api.create({"id": token_id, "type": "token", "data": 1})
    assert (await api.get(token_id))["id"] == token_id


async def test_id_must_be_a_string(api):
    assert_names(await api.create({"id": 12345, "type": "token", "data": 1}, expect=400), "id")


async def test_id_expression_rendering_too_long_an_id_is_400(api):
    assert_names(await api.create({"id": "{{ data }}", "type": "token", "data": "x" * 401},
                                  expect=400), "id")


# --- request body and data size -------------------------------------------------------------

async def test_body_over_the_cap_is_413_problem(api, client, admin_headers, settings):
    body = orjson.dumps({"type": "token", "data": "x" * (settings.max_body_bytes + 1)})
    resp = await client.post("/tokens", data=io.BytesIO(body),
                             headers={**admin_headers, "Content-Type": "application/json"})
    assert resp.status == 413
    assert resp.content_type == PROBLEM_JSON
    problem = await resp.json(content_type=None)
    assert problem["status"] == 413 and "xxxx" not in str(problem)


async def test_patch_body_over_the_cap_is_413_problem(api, client, admin_headers, settings):
    created = await api.create({"type": "token", "data": 1})
    body = orjson.dumps({"data": "x" * (settings.max_body_bytes + 1)})
    resp = await client.patch(f"/tokens/{created['id']}", data=io.BytesIO(body),
                              headers={**admin_headers, "Content-Type": MERGE_PATCH})
    assert resp.status == 413
    assert resp.content_type == PROBLEM_JSON


async def test_data_over_the_cap_is_413(api, settings):
    big = "x" * settings.max_data_bytes
    problem = await api.create({"type": "token", "data": big}, expect=413)
    assert "xxxx" not in str(problem)
    await api.create({"type": "token", "data": "x" * (settings.max_data_bytes - 2)})


async def test_data_grown_over_the_cap_by_a_patch_is_413(api, settings):
    created = await api.create({"type": "token", "data": {"a": "x" * (settings.max_data_bytes
                                                                      // 2)}})
    await api.patch(created["id"], {"data": {"b": "y" * (settings.max_data_bytes // 2)}},
                    expect=413)
    assert set((await api.get(created["id"]))["data"]) == {"a"}


def nested(depth: int):
    value: object = "leaf"
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


def nested_text(depth: int) -> str:
    """JSON nested `depth` objects deep, written out (client encoders stop far earlier)."""
    return '{"k": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [65, 300])
async def test_data_nested_too_deeply_is_400(api, depth):
    assert_names(await api.create({"type": "token", "data": nested(depth)}, expect=400), "data")


async def test_data_nested_1000_deep_is_400(client, admin_headers):
    body = '{"type": "token", "data": ' + nested_text(1000) + "}"
    resp = await client.post("/tokens", data=body,
                             headers={**admin_headers, "Content-Type": "application/json"})
    assert resp.status == 400, await resp.text()
    assert_names(await resp.json(content_type=None), "data")


async def test_patch_nested_too_deeply_is_400(api, client, admin_headers):
    created = await api.create({"type": "token", "data": {"k": 1}})
    resp = await client.patch(f"/tokens/{created['id']}",
                              data='{"data": ' + nested_text(900) + "}",
                              headers={**admin_headers, "Content-Type": MERGE_PATCH})
    assert resp.status == 400, await resp.text()
    assert_names(await resp.json(content_type=None), "data")


async def test_data_nested_64_deep_is_accepted(api):
    created = await api.create({"type": "token", "data": nested(64)})
    assert (await api.get(created["id"]))["data"] == nested(64)


# --- counts ---------------------------------------------------------------------------------

async def test_metadata_entries_are_capped(api, settings):
    n = settings.max_metadata_entries
    await api.create({"type": "token", "data": 1,
                      "metadata": {f"k{i}": "v" for i in range(n)}})
    assert_names(await api.create({"type": "token", "data": 1,
                                   "metadata": {f"k{i}": "v" for i in range(n + 1)}},
                                  expect=400), "metadata")


async def test_metadata_cap_applies_to_the_merged_patch(api, settings):
    n = settings.max_metadata_entries
    created = await api.create({"type": "token", "data": 1,
                                "metadata": {f"k{i}": "v" for i in range(n)}})
    assert_names(await api.patch(created["id"], {"metadata": {"one-more": "v"}}, expect=400),
                 "metadata")
    await api.patch(created["id"], {"metadata": {"k0": None, "one-more": "v"}})


async def test_containers_are_capped(api, settings):
    n = settings.max_containers
    await api.create({"type": "token", "data": 1, "containers": [f"/c{i}/" for i in range(n)]})
    assert_names(await api.create({"type": "token", "data": 1,
                                   "containers": [f"/c{i}/" for i in range(n + 1)]},
                                  expect=400), "containers")


async def test_a_list_of_containers_over_the_cap_is_not_kept(api, settings):
    # The normalised lists are cached by their paths: one over the cap is refused before it is
    # normalised, so a caller cannot fill the cache with large lists of its own.
    from vaultgraph.services.tokens import stored_containers

    stored_containers.cache_clear()
    paths = [f"/over-{i}/" for i in range(settings.max_containers + 1)]
    assert_names(await api.create({"type": "token", "data": 1, "containers": paths},
                                  expect=400), "containers")
    assert stored_containers.cache_info().currsize == 0


async def test_search_indexes_are_capped(api, settings):
    n = settings.max_search_indexes
    await api.create({"type": "token", "data": 1,
                      "search_indexes": [f"{{{{ data }}}}-{i}" for i in range(n)]})
    assert_names(await api.create({"type": "token", "data": 1,
                                   "search_indexes": [f"{{{{ data }}}}-{i}"
                                                      for i in range(n + 1)]},
                                  expect=400), "search_indexes")


@pytest.mark.parametrize(("metadata", "field"), [
    ({"k" * 129: "v"}, "metadata"), ({"": "v"}, "metadata"), ({"k": "v" * 1025}, "metadata"),
    ({"a\u001fb": "c"}, "metadata"), ({"tab\tkey": "v"}, "metadata"),
])
async def test_bad_metadata_key_or_value_is_400(api, metadata, field):
    problem = await api.create({"type": "token", "data": 1, "metadata": metadata}, expect=400)
    assert any(name.startswith(field) for name in problem["errors"])


async def test_long_metadata_key_and_value_within_the_caps_are_filterable(api):
    key, value = "k" * 128, "V" * 1024
    created = await api.create({"type": "token", "data": 1, "metadata": {key: value}})
    assert await api.ids([(f"metadata.{key}", value.lower())]) == [created["id"]]


@pytest.mark.parametrize("field", ["fingerprint_expression", "mask", "id"])
async def test_expressions_are_capped_in_length(api, field):
    expression = "{{ data }}" + "x" * 5000
    problem = await api.create({"type": "token", "data": 1, field: expression}, expect=400)
    assert_names(problem, field)


async def test_long_container_path_is_400(api):
    problem = await api.create({"type": "token", "data": 1, "containers": ["/" + "a" * 300 + "/"]},
                               expect=400)
    assert any(name.startswith("containers") for name in problem["errors"])
