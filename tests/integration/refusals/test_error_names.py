"""Errors name what the caller wrote, and one kind of mistake reads the same wherever it is made
(docs/api.md, "Errors"): a metadata value that is not a string is `metadata.<key>`, and every
bad page size, in a query string or a search body, gets the one page-size message."""

from __future__ import annotations

import uuid

import pytest

from vaultgraph.api.endpoints import MERGE_PATCH_JSON


def page_size_message(settings) -> str:
    return f"must be a whole number from 1 to {settings.page_size_max}"


async def _problem(resp) -> dict:
    assert resp.status == 400, await resp.text()
    return await resp.json(content_type=None)


async def _token(client, headers) -> str:
    resp = await client.post("/tokens", json={"type": "token", "data": "x"}, headers=headers)
    assert resp.status == 201
    return (await resp.json())["id"]


@pytest.mark.parametrize("value", [1, 1.5, True, ["x"], {"b": "c"}])
async def test_a_metadata_value_that_is_not_a_string_is_named_by_its_key(
        client, admin_headers, value):
    token_id = await _token(client, admin_headers)
    body = {"type": "token", "data": "x", "metadata": {"ok": "fine", "a": value}}
    answers = {
        "POST /tokens": await client.post("/tokens", json=body, headers=admin_headers),
        "POST children": await client.post(f"/tokens/{token_id}/children", json=body,
                                           headers=admin_headers),
        "PATCH": await client.patch(f"/tokens/{token_id}", json={"metadata": {"a": value}},
                                    headers={**admin_headers,
                                             "Content-Type": MERGE_PATCH_JSON}),
    }
    for route, resp in answers.items():
        assert (await _problem(resp))["errors"] == {"metadata.a": ["Not a valid string."]}, route
    resp = await client.post("/tokenize", json=[body], headers=admin_headers)
    assert "0.metadata.a" in (await _problem(resp))["errors"]


async def test_null_metadata_values_are_still_taken(client, admin_headers):
    resp = await client.post("/tokens", json={"type": "token", "data": "x",
                                              "metadata": {"a": "b", "c": None}},
                             headers=admin_headers)
    assert resp.status == 201
    assert (await resp.json())["metadata"] == {"a": "b"}


LISTS = ["/tokens", "/tokens/{token}/children", "/tokens/{token}/parents", "/applications",
         "/logs", "/proxies", "/webhooks", "/webhooks/{webhook}/deliveries"]


@pytest.mark.parametrize("size", ["ten", "0", "101", "1.5", "", "-1", "9" * 5000])
@pytest.mark.parametrize("path", LISTS)
async def test_a_bad_query_page_size_has_the_one_message(client, admin_headers, settings,
                                                         path, size):
    url = path.format(token=await _token(client, admin_headers), webhook=uuid.uuid4())
    resp = await client.get(url, params={"size": size}, headers=admin_headers)
    assert (await _problem(resp))["errors"] == {"size": [page_size_message(settings)]}


@pytest.mark.parametrize("size", ["ten", "10", "", 0, 101, 1.5, 10.0, True, [10], {"n": 10}])
async def test_a_bad_search_page_size_has_the_one_message(client, admin_headers, settings,
                                                          size):
    resp = await client.post("/tokens/search", json={"query": "type:token", "size": size},
                             headers=admin_headers)
    assert (await _problem(resp))["errors"] == {"size": [page_size_message(settings)]}


@pytest.mark.parametrize(("size", "page_size"), [(None, None), (3, 3)])
async def test_a_search_page_size_may_be_null_for_the_default(client, admin_headers, settings,
                                                              size, page_size):
    resp = await client.post("/tokens/search", json={"query": "type:token", "size": size},
                             headers=admin_headers)
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["pagination"]["page_size"] == (
        page_size or settings.page_size_default)
