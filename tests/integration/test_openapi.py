"""The OpenAPI document (generated from the endpoint declarations), the /docs page and the
container files, checked against the code."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import pytest

from vaultgraph.api import openapi
from vaultgraph.api.docs import REDOC_BUNDLE, REDOC_URL, REDOC_VERSION, STATIC_DIR
from vaultgraph.api.endpoints import MERGE_PATCH_JSON, PROBLEM_JSON, endpoint_of
from vaultgraph.app import create_app
from vaultgraph.auth.permissions import AUTHENTICATED, PUBLIC, declared
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


def declaration(op: dict) -> tuple[str, ...] | str:
    """What the handler of a described operation must declare (`permissions.declared`)."""
    if op.get("security") == []:
        return PUBLIC
    return tuple(op["x-permission"]) or AUTHENTICATED


def generated(settings: Settings) -> dict:
    return openapi.document(settings, openapi.app_endpoints(create_app(settings).router))


@pytest.fixture
def full(app, settings) -> dict:
    return openapi.document(settings, openapi.app_endpoints(app.router))


# -- the description and the routes ------------------------------------------------------------

def test_every_registered_route_is_declared_and_described(app, full):
    undeclared = [op for op, handler in handlers(app).items() if endpoint_of(handler) is None]
    assert not undeclared, f"routes without an endpoint declaration: {sorted(undeclared)}"
    assert openapi.described_operations(full) == set(handlers(app))


def test_each_operation_states_what_its_handler_declares(app, full):
    for operation, handler in handlers(app).items():
        described = declaration(openapi.operation_of(full, operation))
        actual = declared(handler)
        assert actual == endpoint_of(handler).access
        if isinstance(actual, tuple):
            described, actual = set(described), set(actual)
        assert described == actual, operation


async def test_served_document_is_the_generated_one(client, full):
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    served = await resp.json()
    assert openapi.described_operations(served) == set(handlers(client.server.app))
    assert served == full


def test_only_declared_routes_are_described(settings):
    """A route added without a declaration is not described (and answers 403: test_auth)."""
    async def undeclared(request):
        raise AssertionError("never called")

    app = create_app(settings)
    app.router.add_get("/undeclared", undeclared)
    document = openapi.document(settings, openapi.app_endpoints(app.router))
    assert "/undeclared" not in document["paths"]
    assert ("get", "/health") in openapi.described_operations(document)


# -- the document itself -----------------------------------------------------------------------

def test_document_is_openapi_3_1_and_every_reference_resolves(full):
    assert full["openapi"].startswith("3.1.")
    for ref in refs(full):
        assert ref.startswith("#/components/"), ref
        resolve(full, {"$ref": ref})  # KeyError names a dangling reference
    ids = [op["operationId"] for _, op in _operations(full)]
    assert len(ids) == len(set(ids))
    used = {op["tags"][0] for _, op in _operations(full)}
    assert [tag["name"] for tag in full["tags"]] == [
        name for name in ("Tokens", "Bulk", "Associations", "Applications", "Proxies",
                          "Webhooks", "Operations")
        if name in used]


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
        if path.startswith("/proxy/"):
            assert success == {"200"}, path  # the destination's answer, whatever its status
        elif method == "delete":
            assert success == {"204"}, path
        elif method == "post" and path == "/tokens/search":
            assert success == {"200"}, path  # a query in a body: nothing created
        elif path in ("/tokenize", "/detokenize"):
            # Partial success is a 200 (each item its own result or problem); detokenize
            # creates nothing.
            assert success == {"200"}, path
        elif method == "post" and path.endswith("/retry"):
            assert success == {"202"}, path  # an existing delivery made due: nothing created
        elif method == "post":
            assert "201" in success, path
        else:
            assert success == {"200"}, path


def _params(document: dict, op: dict) -> dict[str, dict]:
    return {p["name"]: p for p in (resolve(document, p) for p in op.get("parameters", ()))}


def test_lists_are_paged_by_size_and_start(full, settings):
    pages = 0
    for _, op in _operations(full):
        schema = op["responses"].get("200", {}).get("content", {}).get("application/json", {})
        if schema.get("schema", {}).get("$ref", "").endswith("Page"):
            pages += 1
            params = _params(full, op)
            if "requestBody" in op:  # search: the page is asked for in the body
                body = resolve(full, op["requestBody"]["content"]["application/json"]["schema"])
                params = {name: {"schema": schema}
                          for name, schema in body["properties"].items()}
            assert params["size"]["schema"]["maximum"] == settings.page_size_max
            assert params["size"]["schema"]["default"] == settings.page_size_default
            assert params["size"]["schema"]["minimum"] == 1
            assert params["start"]["schema"]["pattern"] == "^[A-Za-z0-9_-]*$"
            assert "400" in op["responses"], op["operationId"]
    # token list, search, parents, children, application list, audit log, proxy list,
    # webhooks, attempts
    assert pages == 9


def test_update_token_takes_only_merge_patch(full):
    patch = full["paths"]["/tokens/{id}"]["patch"]
    assert list(patch["requestBody"]["content"]) == [MERGE_PATCH_JSON]
    assert "415" in patch["responses"]


# -- limits: the running Settings, and every bound the code enforces (hardening #18.11) --------

def test_settings_dependent_limits_come_from_the_running_settings(settings):
    custom = dataclasses.replace(settings, page_size_max=33, page_size_default=7,
                                 max_containers=3, max_metadata_entries=4,
                                 max_search_indexes=5, max_data_bytes=1234)
    document = generated(custom)
    schemas = document["components"]["schemas"]
    for name in ("CreateToken", "UpdateToken"):
        props = schemas[name]["properties"]
        assert props["containers"]["maxItems"] == 3
        assert props["metadata"]["maxProperties"] == 4
        assert props["search_indexes"]["maxItems"] == 5
        assert props["data"]["x-maxBytes"] == 1234
        assert "1234 bytes" in props["data"]["description"]
    size = _params(document, document["paths"]["/tokens"]["get"])["size"]["schema"]
    assert (size["maximum"], size["default"]) == (33, 7)


def test_ids_are_3_to_400_characters_in_paths_and_bodies(full):
    from vaultgraph.tokens.fields import TOKEN_ID_MAX_LENGTH, TOKEN_ID_MIN_LENGTH

    bounds = (TOKEN_ID_MIN_LENGTH, TOKEN_ID_MAX_LENGTH)
    token_paths = 0
    for (_, path), op in _operations(full, with_path=True):
        for param in op.get("parameters", ()):
            if param["in"] == "path" and path.startswith("/tokens"):
                token_paths += 1
                assert (param["schema"]["minLength"], param["schema"]["maxLength"]) == bounds
            if param["in"] == "path" and path.startswith("/applications"):
                assert param["schema"]["format"] == "uuid"
    assert token_paths == 11
    log_filter = _params(full, full["paths"]["/logs"]["get"])["token_id"]["schema"]
    assert (log_filter["minLength"], log_filter["maxLength"]) == bounds  # as GET /logs enforces
    literal = full["components"]["schemas"]["CreateToken"]["properties"]["id"]["anyOf"][0]
    assert (literal["minLength"], literal["maxLength"]) == bounds
    pattern = re.compile(literal["pattern"])
    assert pattern.match("cust-42.a_b")
    for bad in ("a/b", "a b", "a\x00b", "a{b", "a%b"):
        assert not pattern.match(bad), bad


def test_token_body_limits_the_code_enforces_are_stated(full):
    from vaultgraph.tokens.schemas import MAX_EXPRESSION, MAX_METADATA_KEY, MAX_METADATA_VALUE

    for name in ("CreateToken", "UpdateToken"):
        props = full["components"]["schemas"][name]["properties"]
        assert props["expires_at"]["minLength"] == 1
        keys = props["metadata"]["propertyNames"]
        assert (keys["minLength"], keys["maxLength"]) == (1, MAX_METADATA_KEY)
        assert not re.match(keys["pattern"], "a\x1fb")
        assert props["metadata"]["additionalProperties"]["maxLength"] == MAX_METADATA_VALUE
        assert props["search_indexes"]["items"]["maxLength"] == MAX_EXPRESSION
        assert props["fingerprint_expression"]["maxLength"] == MAX_EXPRESSION
        container = props["containers"]["items"]
        assert re.match(container["pattern"], "/pci/high/")
        assert not re.match(container["pattern"], "pci")
    create = full["components"]["schemas"]["CreateToken"]
    assert set(create["required"]) == {"type", "data"}
    assert create["additionalProperties"] is False


def test_application_limits_are_stated(full):
    from vaultgraph.applications.schemas import MAX_DESCRIPTION, MAX_NAME, MAX_RULES

    app = full["components"]["schemas"]["ApplicationInput"]
    assert (app["properties"]["name"]["minLength"], app["properties"]["name"]["maxLength"]) == (
        1, MAX_NAME)
    assert app["properties"]["rules"]["maxItems"] == MAX_RULES
    rule = full["components"]["schemas"]["AccessRuleInput"]["properties"]
    assert rule["description"]["maxLength"] == MAX_DESCRIPTION
    assert rule["permissions"]["minItems"] == 1


async def test_stated_page_size_bound_is_the_enforced_one(client, admin_headers, full):
    size = _params(full, full["paths"]["/tokens"]["get"])["size"]["schema"]
    ok = await client.get("/tokens", params={"size": str(size["maximum"])}, headers=admin_headers)
    assert ok.status == 200
    for bad in (size["maximum"] + 1, size["minimum"] - 1):
        resp = await client.get("/tokens", params={"size": str(bad)}, headers=admin_headers)
        assert resp.status == 400
        assert list((await resp.json())["errors"]) == ["size"]


# -- /applications/self is GET only ------------------------------------------------------------

async def test_options_on_applications_self_allows_only_get(client, admin_headers):
    resp = await client.options("/applications/self", headers=admin_headers)
    assert resp.status == 405
    assert set(resp.headers["Allow"].split(",")) == {"GET", "HEAD"}
    for method in ("PUT", "DELETE"):
        resp = await client.request(method, "/applications/self", headers=admin_headers,
                                    json={"name": "x"})
        assert resp.status == 405, method
        assert resp.content_type == PROBLEM_JSON


async def test_the_id_routes_still_serve_other_ids(client, admin_headers):
    resp = await client.options("/applications/00000000-0000-0000-0000-000000000000",
                                headers=admin_headers)
    assert {"GET", "PUT", "DELETE"} <= set(resp.headers["Allow"].split(","))
    resp = await client.get("/applications/selfish", headers=admin_headers)
    assert resp.status == 404


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
    return _params(document, op)[name]


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
    assert "400" in op["responses"]
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
    assert "VAULTGRAPH_NEO4J_URI: bolt://neo4j:7687" in compose
    assert "VAULTGRAPH_KEK_FILE: /run/secrets/vaultgraph_kek" in compose  # a secret file
    assert "image: neo4j:5.26-community" in compose
    assert "condition: service_healthy" in compose


def test_dockerfile_serves_on_all_interfaces_with_a_health_check(app):
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert "VAULTGRAPH_HOST=0.0.0.0" in dockerfile
    assert "VAULTGRAPH_CYPHER_DIR=" not in dockerfile  # the catalog ships in the package
    assert re.search(r"^USER (?!root)", dockerfile, re.MULTILINE)
    assert "/health" in dockerfile and ("get", "/health") in handlers(app)
