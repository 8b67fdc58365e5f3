"""The OpenAPI document, the /docs page and the container files, checked against the code."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from vaultgraph import openapi
from vaultgraph.api.docs import REDOC_BUNDLE, REDOC_URL, REDOC_VERSION, STATIC_DIR
from vaultgraph.auth.permissions import declared
from vaultgraph.openapi.shapes import MERGE_PATCH_JSON, PROBLEM_JSON, declaration
from vaultgraph.settings import PROJECT_ROOT, Settings


def handlers(app) -> dict[openapi.Operation, object]:
    """(method, path template) → handler of every route that must be described."""
    return {(route.method.lower(), route.resource.canonical): route.handler
            for route in app.router.routes()
            if route.method.lower() not in openapi.UNDESCRIBED_METHODS}


def refs(node) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def resolve(document: dict, node: dict) -> dict:
    while "$ref" in node:
        _, *parts = node["$ref"].split("/")
        node = document
        for part in parts:
            node = node[part]
    return node


@pytest.fixture
def full(settings) -> dict:
    return openapi.full_document(settings)


# -- the description and the routes ------------------------------------------------------------

def test_every_registered_route_is_described(app, full):
    missing = set(handlers(app)) - openapi.described_operations(full)
    assert not missing, f"routes missing from vaultgraph/openapi/paths.py: {sorted(missing)}"


def test_each_operation_states_what_its_handler_declares(app, full):
    for operation, handler in handlers(app).items():
        described = declaration(openapi.operation_of(full, operation))
        actual = declared(handler)
        if isinstance(actual, tuple):
            described, actual = set(described), set(actual)
        assert described == actual, operation


async def test_served_document_names_exactly_the_registered_routes(client):
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    served = await resp.json()
    assert openapi.described_operations(served) == set(handlers(client.server.app))


def test_routes_not_registered_yet_are_not_published(full):
    published = openapi.published(full, {("get", "/health"), ("post", "/tokens")})
    assert openapi.described_operations(published) == {("get", "/health"), ("post", "/tokens")}
    assert [tag["name"] for tag in published["tags"]] == ["Tokens", "Operations"]
    assert "get" not in published["paths"]["/tokens"]


# -- the document itself -----------------------------------------------------------------------

def test_document_is_openapi_3_1_and_every_reference_resolves(full):
    assert full["openapi"].startswith("3.1.")
    for ref in refs(full):
        assert ref.startswith("#/components/"), ref
        resolve(full, {"$ref": ref})  # KeyError names a dangling reference
    ids = [op["operationId"] for _, op in _operations(full)]
    assert len(ids) == len(set(ids))


def test_api_key_is_the_security_scheme_and_public_operations_waive_it(full):
    scheme = full["components"]["securitySchemes"]["apiKey"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "SVC-API-KEY")
    assert full["security"] == [{"apiKey": []}]
    public = {path for path, op in _operations(full) if op.get("security") == []}
    assert {"/health", "/ready", "/openapi.json", "/docs", REDOC_URL} <= public


def test_errors_are_problem_json(full):
    for _, op in _operations(full):
        for status, response in op["responses"].items():
            if status.startswith(("4", "5")):
                media = resolve(full, response)["content"]
                assert list(media) == [PROBLEM_JSON]
                assert media[PROBLEM_JSON]["schema"] == {"$ref": "#/components/schemas/Problem"}
    problem = full["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail", "errors"} <= set(problem["properties"])


def test_success_statuses_follow_the_design(full):
    for (method, path), op in _operations(full, with_path=True):
        success = {s for s in op["responses"] if s.startswith("2")}
        if method == "delete":
            assert success == {"204"}, path
        elif method == "post":
            assert "201" in success, path
        else:
            assert success == {"200"}, path


def test_lists_are_paged_by_size_and_start(full, settings):
    params = full["components"]["parameters"]
    assert params["PageSize"]["schema"]["maximum"] == settings.page_size_max
    assert params["PageSize"]["schema"]["default"] == settings.page_size_default
    for _, op in _operations(full):
        schema = op["responses"].get("200", {}).get("content", {}).get("application/json", {})
        if schema.get("schema", {}).get("$ref", "").endswith("Page"):
            names = {p["$ref"].rsplit("/", 1)[1] for p in op["parameters"] if "$ref" in p}
            assert {"PageSize", "PageStart"} <= names, op["operationId"]


def test_update_token_takes_only_merge_patch(full):
    patch = full["paths"]["/tokens/{id}"]["patch"]
    assert list(patch["requestBody"]["content"]) == [MERGE_PATCH_JSON]
    assert "415" in patch["responses"]


# -- operations whose shape the handlers fixed: statuses, parameters and bodies ------------------

def schema_fields(document: dict, schema: dict) -> tuple[set[str], set[str]]:
    """(properties, required) of an object schema, through `$ref` and `allOf`."""
    schema = resolve(document, schema)
    properties, required = set(schema.get("properties", ())), set(schema.get("required", ()))
    for part in schema.get("allOf", ()):
        more, needed = schema_fields(document, part)
        properties |= more
        required |= needed
    return properties, required


def response_schema(document: dict, op: dict, status: int) -> dict:
    return resolve(document, op["responses"][str(status)])["content"]["application/json"][
        "schema"]


def assert_described(document: dict, op: dict, status: int, body: dict) -> None:
    """A real answer has every required field and no field the description lacks."""
    properties, required = schema_fields(document, response_schema(document, op, status))
    assert required <= set(body), sorted(required - set(body))
    assert set(body) <= properties, sorted(set(body) - properties)


def param(document: dict, op: dict, name: str) -> dict:
    for candidate in op.get("parameters", ()):
        candidate = resolve(document, candidate)
        if candidate["name"] == name:
            return candidate
    raise AssertionError(f"{op['operationId']} has no parameter {name}")


async def _token(client, headers, **body) -> dict:
    resp = await client.post("/tokens", json={"type": "token", "data": "x", **body},
                             headers=headers)
    assert resp.status == 201
    return await resp.json()


async def test_association_is_201_with_the_link_then_204_without_a_body(client, admin_headers,
                                                                      full):
    op = full["paths"]["/tokens/{parent_id}/children/{child_id}"]["post"]
    assert {s for s in op["responses"] if s.startswith("2")} == {"201", "204"}
    assert "content" not in op["responses"]["204"]
    assert {"400", "403", "404"} <= set(op["responses"])
    assert schema_fields(full, response_schema(full, op, 201))[1] == {
        "parent_id", "child_id", "created_at"}
    parent, child = await _token(client, admin_headers), await _token(client, admin_headers)
    path = f"/tokens/{parent['id']}/children/{child['id']}"
    resp = await client.post(path, headers=admin_headers)
    assert resp.status == 201
    assert_described(full, op, 201, await resp.json())
    assert (await client.post(path, headers=admin_headers)).status == 204


def test_unlinking_needs_token_delete_on_both_tokens(full):
    op = full["paths"]["/tokens/{parent_id}/children/{child_id}"]["delete"]
    assert op["x-permission"] == ["token:delete"]
    assert "on both" in op["description"]
    assert {"204", "400", "403", "404"} <= set(op["responses"])


async def test_graph_takes_depth_and_direction_and_answers_a_token_graph(client, admin_headers,
                                                                        full):
    from vaultgraph.services import graph

    op = full["paths"]["/tokens/{id}/graph"]["get"]
    depth = param(full, op, "depth")
    assert (depth["in"], depth["schema"]) == ("query", {
        "type": "integer", "minimum": graph.MIN_DEPTH, "maximum": graph.MAX_DEPTH,
        "default": graph.DEFAULT_DEPTH})
    direction = param(full, op, "direction")
    assert direction["schema"]["enum"] == list(graph.DIRECTIONS)
    assert direction["schema"]["default"] == graph.DEFAULT_DIRECTION
    assert schema_fields(full, response_schema(full, op, 200)) == (
        {"root", "depth", "direction", "truncated", "nodes", "edges"},) * 2
    parent, child = await _token(client, admin_headers), await _token(client, admin_headers)
    await client.post(f"/tokens/{parent['id']}/children/{child['id']}", headers=admin_headers)
    resp = await client.get(f"/tokens/{parent['id']}/graph",
                            params={"depth": "1", "direction": "both"}, headers=admin_headers)
    body = await resp.json()
    assert_described(full, op, 200, body)
    assert (body["depth"], body["direction"]) == (1, "both")


async def test_child_token_is_201_in_the_child_shape_and_200_when_deduplicated(
        client, admin_headers, full):
    op = full["paths"]["/tokens/{parent_id}/children"]["post"]
    child_fields, _ = schema_fields(full, response_schema(full, op, 201))
    assert not {"data", "mask", "search_indexes"} & child_fields
    assert "linked" in op["responses"]["200"]["description"]
    parent = await _token(client, admin_headers)
    body = {"type": "token", "data": "child", "deduplicate_token": True}
    resp = await client.post(f"/tokens/{parent['id']}/children", json=body,
                             headers=admin_headers)
    assert resp.status == 201
    assert_described(full, op, 201, await resp.json())
    other = await _token(client, admin_headers)
    resp = await client.post(f"/tokens/{other['id']}/children", json=body,
                             headers=admin_headers)
    assert resp.status == 200
    assert_described(full, op, 200, await resp.json())


async def test_a_deduplicated_answer_the_caller_cannot_read_is_described(client, admin_headers,
                                                                        full):
    """The cut-down answer (id, type, tenant_id, fingerprint, containers) fits the 200."""
    from factories import key_headers, make_application

    await _token(client, admin_headers, data="same", deduplicate_token=True)
    writer = key_headers(await make_application(
        client, admin_headers, permissions=["token:create", "token:read"],
        rules=[{"container": "/pci/", "transform": "reveal",
                "permissions": ["token:create", "token:read"]}]))
    resp = await client.post("/tokens", headers=writer, json={
        "type": "token", "data": "same", "deduplicate_token": True, "containers": ["/pci/"]})
    body = await resp.json()
    assert resp.status == 200, body
    assert "created_at" not in body
    assert_described(full, full["paths"]["/tokens"]["post"], 200, body)


@pytest.mark.parametrize("method, path, lock_out", [
    ("put", "/applications/{id}", "its own `application:*` permissions"),
    ("delete", "/applications/{id}", "itself"),
    ("delete", "/applications/{id}/keys/{key_id}", "the key it is calling with"),
])
def test_self_lock_out_is_a_described_400(full, method, path, lock_out):
    op = full["paths"][path][method]
    assert "400" in op["responses"]
    assert lock_out in op["description"]


async def test_own_application_carries_the_key_id(client, admin_headers, full):
    op = full["paths"]["/applications/self"]["get"]
    assert "key_id" in schema_fields(full, response_schema(full, op, 200))[1]
    resp = await client.get("/applications/self", headers=admin_headers)
    assert_described(full, op, 200, await resp.json())


def _operations(document: dict, with_path: bool = False):
    for path, item in document["paths"].items():
        for method, op in item.items():
            if method in openapi.METHODS:
                yield ((method, path) if with_path else path), op


# -- /openapi.json, /docs and the Redoc bundle -------------------------------------------------

async def test_openapi_json_is_public_and_revalidated_by_etag(client):
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    assert resp.content_type == "application/json"
    assert resp.headers["Cache-Control"] == "no-cache"
    again = await client.get("/openapi.json", headers={"If-None-Match": resp.headers["ETag"]})
    assert again.status == 304


async def test_docs_page_renders_the_document_with_the_local_redoc(client):
    resp = await client.get("/docs")
    assert resp.status == 200
    assert resp.content_type == "text/html"
    html = await resp.text()
    assert 'spec-url="openapi.json"' in html
    assert re.search(r'<script type="module" src="static/redoc\.standalone\.js\?v=[0-9.]+">', html)
    assert "//" not in html.replace("<!DOCTYPE html>", "")  # no CDN, nothing off this origin
    csp = resp.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp
    assert "script-src 'self';" in csp
    assert "connect-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp


async def test_redoc_bundle_is_served_as_javascript_with_caching(client):
    resp = await client.get(REDOC_URL)
    assert resp.status == 200
    assert resp.content_type == "text/javascript"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert "max-age=" in resp.headers["Cache-Control"]
    assert resp.headers["ETag"]
    assert len(await resp.read()) == REDOC_BUNDLE.stat().st_size
    again = await client.get(REDOC_URL, headers={"If-None-Match": resp.headers["ETag"]})
    assert again.status == 304


def test_vendored_redoc_carries_its_licence_and_noted_version():
    header = REDOC_BUNDLE.read_text(encoding="utf-8")[:400]
    assert f"Version: {REDOC_VERSION}" in header
    assert "MIT License" in (STATIC_DIR / "redoc.LICENSE").read_text()
    assert f"| {REDOC_VERSION} |" in (STATIC_DIR / "README.md").read_text()


# -- containers: Dockerfile and docker-compose.yml use real settings ---------------------------
# (No Docker here: these read the files against vaultgraph/settings.py.)

SETTING_NAMES = {"VAULTGRAPH_" + name.upper() for name in Settings.__dataclass_fields__}
VARIABLE = re.compile(r"\bVAULTGRAPH_[A-Z0-9_]+")


@pytest.mark.parametrize("filename", ["Dockerfile", "docker-compose.yml"])
def test_container_files_name_only_real_settings(filename):
    names = set(VARIABLE.findall((PROJECT_ROOT / filename).read_text()))
    assert names, filename
    assert names <= SETTING_NAMES, sorted(names - SETTING_NAMES)


def test_compose_service_gets_neo4j_and_a_required_kek():
    compose = (PROJECT_ROOT / "docker-compose.yml").read_text()
    assert "VAULTGRAPH_NEO4J_URI: neo4j://neo4j:7687" in compose
    assert "VAULTGRAPH_KEK: ${VAULTGRAPH_KEK:?" in compose
    assert "image: neo4j:5.26-community" in compose
    assert "condition: service_healthy" in compose


def test_dockerfile_serves_on_all_interfaces_with_a_health_check(app):
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert "VAULTGRAPH_HOST=0.0.0.0" in dockerfile
    assert "VAULTGRAPH_CYPHER_DIR=" in dockerfile
    assert re.search(r"^USER (?!root)", dockerfile, re.MULTILINE)
    assert "/health" in dockerfile and ("get", "/health") in handlers(app)
