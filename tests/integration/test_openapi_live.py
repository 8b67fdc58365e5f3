"""Live answers of the main routes, validated against the served /openapi.json (JSON Schema
Draft 2020-12): the status is one the operation declares, the media type is the declared one,
and the body fits the declared schema."""

from __future__ import annotations

import pytest
from factories import key_headers, make_application
from jsonschema import Draft202012Validator

PROBLEM_JSON = "application/problem+json"


class Conformance:
    def __init__(self, client, document: dict):
        self.client = client
        self.document = document
        self.seen: set[tuple[str, str, int]] = set()

    async def call(self, method: str, template: str, *, expect: int, headers=None,
                   json=None, data=None, params=None, content_type=None, **path):
        url = template.format(**path)
        headers = dict(headers or {})
        if content_type is not None:
            headers["Content-Type"] = content_type
        resp = await self.client.request(method, url, headers=headers, json=json, data=data,
                                         params=params)
        body = await resp.read()
        assert resp.status == expect, (method, template, resp.status, body[:300])
        op = self.document["paths"][template][method.lower()]
        assert str(resp.status) in op["responses"], (method, template, resp.status)
        response = self._resolve(op["responses"][str(resp.status)])
        self.seen.add((method.lower(), template, resp.status))
        if "content" not in response:
            assert body == b"", (method, template)
            return None
        assert resp.content_type in response["content"], (method, template, resp.content_type)
        schema = response["content"][resp.content_type]["schema"]
        if not resp.content_type.endswith("json"):
            assert schema == {"type": "string"}
            return body.decode()
        value = await resp.json(content_type=None)
        validator = Draft202012Validator(
            {**schema, "components": self.document["components"]},
            format_checker=Draft202012Validator.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        assert not errors, (method, template, resp.status,
                            [(list(e.absolute_path), e.message[:200]) for e in errors])
        return value

    def _resolve(self, node: dict) -> dict:
        while "$ref" in node:
            _, *parts = node["$ref"].split("/")
            node = self.document
            for part in parts:
                node = node[part]
        return node


@pytest.fixture
async def api(client) -> Conformance:
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    return Conformance(client, await resp.json())


def test_the_document_schemas_are_valid_draft_2020_12(api):
    for schema in api.document["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)


async def test_token_routes_answer_what_the_document_describes(api, admin_headers):
    h = admin_headers
    card = {"type": "card", "data": {"number": "4242424242424242", "expiration_month": 12,
                                     "expiration_year": 2030, "cvc": "123"},
            "metadata": {"customer": "c-1"}, "containers": ["/pci/"],
            "search_indexes": ["{{ data.number }}"], "deduplicate_token": True,
            "expires_at": "2999-01-01T00:00:00Z"}
    token = await api.call("POST", "/tokens", expect=201, headers=h, json=card)
    again = await api.call("POST", "/tokens", expect=200, headers=h, json=card)
    assert again["_extras"] == {"deduplicated": True}
    await api.call("POST", "/tokens", expect=201, headers=h,
                   json={"id": "plain-1", "type": "token", "data": [1, {"a": None}]})
    await api.call("GET", "/tokens/{id}", expect=200, headers=h, id=token["id"])
    await api.call("GET", "/tokens/{id}", expect=404, headers=h, id="no-such-token")
    await api.call("PATCH", "/tokens/{id}", expect=200, headers=h, id=token["id"],
                   data=b'{"metadata": {"customer": null, "k": "v"}, "expires_at": null}',
                   content_type="application/merge-patch+json")
    await api.call("PATCH", "/tokens/{id}", expect=415, headers=h, id=token["id"],
                   json={"metadata": {}})
    listed = await api.call("GET", "/tokens", expect=200, headers=h, params={"size": "1"})
    assert listed["pagination"]["next"]
    await api.call("GET", "/tokens", expect=200, headers=h,
                   params={"size": "1", "start": listed["pagination"]["next"]})
    await api.call("GET", "/tokens", expect=200, headers=h,
                   params=[("type", "card"), ("metadata.k", "v"), ("id", token["id"])])
    await api.call("GET", "/tokens", expect=400, headers=h, params={"size": "0"})
    await api.call("GET", "/tokens", expect=400, headers=h, params={"start": "!!"})
    await api.call("POST", "/tokens", expect=400, headers=h, json={"type": "card", "data": {}})
    await api.call("POST", "/tokens", expect=400, headers=h,
                   json={"type": "token", "data": 1, "unknown": 1})
    await api.call("POST", "/tokens", expect=409, headers=h,
                   json={"id": "plain-1", "type": "token", "data": 1})
    await api.call("GET", "/tokens", expect=401, headers={})
    await api.call("DELETE", "/tokens/{id}", expect=204, headers=h, id="plain-1")
    await api.call("DELETE", "/tokens/{id}", expect=404, headers=h, id="plain-1")


async def test_graph_routes_answer_what_the_document_describes(api, admin_headers):
    h = admin_headers
    parent = await api.call("POST", "/tokens", expect=201, headers=h,
                            json={"type": "token", "data": "p"})
    other = await api.call("POST", "/tokens", expect=201, headers=h,
                           json={"type": "token", "data": "o"})
    child_body = {"type": "token", "data": "c", "deduplicate_token": True,
                  "metadata": {"m": "1"}}
    child = await api.call("POST", "/tokens/{parent_id}/children", expect=201, headers=h,
                           json=child_body, parent_id=parent["id"])
    await api.call("POST", "/tokens/{parent_id}/children", expect=200, headers=h,
                   json=child_body, parent_id=other["id"])
    await api.call("POST", "/tokens/{parent_id}/children", expect=404, headers=h,
                   json=child_body, parent_id="no-such-token")
    link = {"parent_id": parent["id"], "child_id": other["id"]}
    await api.call("POST", "/tokens/{parent_id}/children/{child_id}", expect=201, headers=h,
                   **link)
    await api.call("POST", "/tokens/{parent_id}/children/{child_id}", expect=204, headers=h,
                   **link)
    await api.call("POST", "/tokens/{parent_id}/children/{child_id}", expect=400, headers=h,
                   parent_id=parent["id"], child_id=parent["id"])
    page = await api.call("GET", "/tokens/{parent_id}/children", expect=200, headers=h,
                          params={"size": "1"}, parent_id=parent["id"])
    assert page["pagination"]["next"]
    await api.call("GET", "/tokens/{parent_id}/children", expect=200, headers=h,
                   params=[("type", "token"), ("id", child["id"])], parent_id=parent["id"])
    await api.call("GET", "/tokens/{id}/parents", expect=200, headers=h, id=child["id"])
    await api.call("GET", "/tokens/{id}/parents", expect=404, headers=h, id="no-such-token")
    graph = await api.call("GET", "/tokens/{id}/graph", expect=200, headers=h,
                           params={"depth": "2", "direction": "both"}, id=parent["id"])
    assert len(graph["nodes"]) == 3
    await api.call("GET", "/tokens/{id}/graph", expect=400, headers=h,
                   params={"depth": "9"}, id=parent["id"])
    await api.call("DELETE", "/tokens/{parent_id}/children/{child_id}", expect=204, headers=h,
                   **link)
    await api.call("DELETE", "/tokens/{parent_id}/children/{child_id}", expect=404, headers=h,
                   **link)


async def test_a_redacted_duplicate_fits_the_document(api, client, admin_headers):
    await api.call("POST", "/tokens", expect=201, headers=admin_headers,
                   json={"type": "token", "data": "same", "deduplicate_token": True})
    writer = key_headers(await make_application(
        client, admin_headers, permissions=["token:create", "token:read"],
        rules=[{"container": "/pci/", "transform": "reveal",
                "permissions": ["token:create", "token:read"]}]))
    body = await api.call("POST", "/tokens", expect=200, headers=writer, json={
        "type": "token", "data": "same", "deduplicate_token": True, "containers": ["/pci/"]})
    assert "created_at" not in body
    await api.call("GET", "/tokens", expect=403, headers=key_headers(await make_application(
        client, admin_headers, permissions=["token:create"])))


async def test_application_routes_answer_what_the_document_describes(api, admin_headers):
    h = admin_headers
    draft = {"name": "reader", "permissions": ["token:read"],
             "rules": [{"container": "/pci/", "transform": "mask",
                        "permissions": ["token:read"], "description": "cards"}]}
    created = await api.call("POST", "/applications", expect=201, headers=h, json=draft)
    await api.call("POST", "/applications", expect=400, headers=h, json={"name": " "})
    page = await api.call("GET", "/applications", expect=200, headers=h, params={"size": "1"})
    await api.call("GET", "/applications", expect=200, headers=h,
                   params={"start": page["pagination"]["next"]})
    await api.call("GET", "/applications/self", expect=200, headers=h)
    await api.call("GET", "/applications/{id}", expect=200, headers=h, id=created["id"])
    await api.call("GET", "/applications/{id}", expect=404, headers=h, id="not-a-uuid")
    await api.call("PUT", "/applications/{id}", expect=200, headers=h, id=created["id"],
                   json={**draft, "name": "renamed"})
    key = await api.call("POST", "/applications/{id}/keys", expect=201, headers=h,
                         id=created["id"])
    await api.call("GET", "/applications/{id}/keys", expect=200, headers=h, id=created["id"])
    await api.call("DELETE", "/applications/{id}/keys/{key_id}", expect=204, headers=h,
                   id=created["id"], key_id=key["id"])
    await api.call("DELETE", "/applications/{id}", expect=204, headers=h, id=created["id"])
    await api.call("DELETE", "/applications/{id}", expect=404, headers=h, id=created["id"])


async def test_operations_routes_answer_what_the_document_describes(api):
    await api.call("GET", "/health", expect=200)
    await api.call("GET", "/ready", expect=200)
    await api.call("GET", "/docs", expect=200)
    await api.call("GET", "/openapi.json", expect=200)
