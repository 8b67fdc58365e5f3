"""A filter value outside what the document states for it is a 400 naming the parameter, never
an empty page (docs/api.md, "Errors"): the query parameters the OpenAPI bounds, the metadata
filters of `GET /tokens`, and the search terms that take a token id or a metadata entry."""

from __future__ import annotations

import pytest

from vaultgraph.api import openapi
from vaultgraph.api.endpoints import PROBLEM_JSON
from vaultgraph.tokens.schemas import MAX_METADATA_KEY, MAX_METADATA_VALUE


def bounded_query_parameters(document: dict) -> list[tuple[str, str, dict]]:
    """(path, parameter, its string schema) of every GET query parameter the document bounds
    by length, itself or its items."""
    out = []
    for path, item in document["paths"].items():
        for param in item.get("get", {}).get("parameters", ()):
            schema = param.get("schema", {})
            schema = schema.get("items", schema)
            if param["in"] == "query" and ({"minLength", "maxLength"} & set(schema)):
                out.append((path, param["name"], schema))
    return out


async def _token(client, headers, token_id: str) -> None:
    resp = await client.post("/tokens", json={"id": token_id, "type": "token", "data": "x"},
                             headers=headers)
    assert resp.status == 201, await resp.text()


async def assert_refused(resp, named: str, value: str) -> None:
    text = await resp.text()
    assert resp.status == 400, text
    assert resp.content_type == PROBLEM_JSON
    assert list((await resp.json(content_type=None))["errors"]) == [named]
    if len(value) > 4:  # a shorter one may be in a message by chance
        assert value not in text  # the rule, never the value


def test_the_id_filters_are_the_bounded_parameters(app, settings):
    document = openapi.document(settings, openapi.app_endpoints(app.router))
    assert {(path, name) for path, name, _ in bounded_query_parameters(document)} == {
        ("/tokens", "id"), ("/tokens/{parent_id}/children", "id"),
        ("/tokens/{id}/parents", "id"), ("/logs", "token_id")}


async def test_every_bounded_query_parameter_refuses_a_value_outside_its_bounds(
        app, settings, client, admin_headers):
    await _token(client, admin_headers, "filter-host")
    document = openapi.document(settings, openapi.app_endpoints(app.router))
    checked = 0
    for path, name, schema in bounded_query_parameters(document):
        url = path.replace("{parent_id}", "filter-host").replace("{id}", "filter-host")
        ok = await client.get(url, params={name: "filter-host"}, headers=admin_headers)
        assert ok.status == 200, (url, name, await ok.text())
        for value in ("q" * (schema["minLength"] - 1), "q" * (schema["maxLength"] + 1),
                      "has a space"):
            resp = await client.get(url, params={name: value}, headers=admin_headers)
            await assert_refused(resp, name, value)
            checked += 1
    assert checked == 12


@pytest.mark.parametrize("path", ["/tokens", "/tokens/filter-host/children",
                                  "/tokens/filter-host/parents"])
async def test_a_bad_id_among_good_ones_is_refused(client, admin_headers, path):
    await _token(client, admin_headers, "filter-host")
    resp = await client.get(path, params=[("id", "filter-host"), ("id", "no")],
                            headers=admin_headers)
    await assert_refused(resp, "id", "no")


@pytest.mark.parametrize(("name", "value", "named"), [
    ("metadata." + "k" * (MAX_METADATA_KEY + 1), "v", "metadata"),
    ("metadata.", "v", "metadata"),
    ("metadata.a\u0001bcdef", "v", "metadata"),
    ("metadata.colour", "r" * (MAX_METADATA_VALUE + 1), "metadata.colour"),
])
async def test_a_metadata_filter_outside_the_metadata_limits_is_refused(
        client, admin_headers, name, value, named):
    resp = await client.get("/tokens", params=[("metadata.ok", "v"), (name, value)],
                            headers=admin_headers)
    await assert_refused(resp, named, value)
    key = name.partition(".")[2]
    if named == "metadata" and len(key) > 4:  # a bad key is not echoed, in names or messages
        assert key not in await resp.text()


async def test_metadata_filters_at_the_limits_are_taken(client, admin_headers):
    key, value = "K" * MAX_METADATA_KEY, "v" * MAX_METADATA_VALUE
    resp = await client.post("/tokens", json={"type": "token", "data": 1,
                                              "metadata": {key: value}}, headers=admin_headers)
    assert resp.status == 201
    created = await resp.json()
    resp = await client.get("/tokens", params={f"metadata.{key.lower()}": value},
                            headers=admin_headers)
    assert [t["id"] for t in (await resp.json())["data"]] == [created["id"]]


@pytest.mark.parametrize(("query", "problem"), [
    ("id:no", "`id` takes a token id that must be 3 to 400 characters long"),
    ("parent:no", "`parent` takes a token id that must be 3 to 400 characters long"),
    ("child:" + "c" * 401, "`child` takes a token id that must be 3 to 400 characters long"),
    ("ancestor:a%b", "`ancestor` takes a token id that must not contain any of"),
    ("descendant:no", "`descendant` takes a token id that must be 3 to 400 characters long"),
    ("metadata." + "k" * (MAX_METADATA_KEY + 1) + ":v",
     f"`metadata.…` keys must be 1 to {MAX_METADATA_KEY} characters"),
    ("metadata.colour:" + "r" * (MAX_METADATA_VALUE + 1),
     f"`metadata.…` values must be at most {MAX_METADATA_VALUE} characters"),
])
async def test_a_search_term_no_token_could_match_is_refused_at_its_position(
        client, admin_headers, query, problem):
    resp = await client.post("/tokens/search", json={"query": "type:token AND " + query},
                             headers=admin_headers)
    text = await resp.text()
    assert resp.status == 400, text
    [message] = (await resp.json(content_type=None))["errors"]["query"]
    assert message.startswith(f"position 16: {problem}")
    field, _, value = query.partition(":")
    for typed in (value, field.partition(".")[2]):  # the value, and a metadata key
        if len(typed) > 4:
            assert typed not in text
