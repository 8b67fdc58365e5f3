"""Who may call which token and graph route: every subset of the token permissions against
every token and graph route (like test_auth.py's matrix of the management routes). A route
answers its success status exactly when the caller holds the permissions it declares, else 403;
and a refused write leaves the tenant's stored state (tests/support/snapshot.py) as it was."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import orjson
import pytest
from factories import key_headers, make_application
from support.snapshot import tenant_snapshot

CREATE, READ, UPDATE, DELETE, SEARCH = ("token:create", "token:read", "token:update",
                                        "token:delete", "token:search")
TOKEN_PERMISSIONS = (CREATE, READ, UPDATE, DELETE, SEARCH)


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    needs: frozenset[str]
    ok: int
    body: object = None
    content_type: str = "application/json"
    writes: bool = field(default=False)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def route(method, path, needs, ok, body=None, *, writes=False, content_type="application/json"):
    return Route(method, path, frozenset(needs), ok, body, content_type, writes)


# In this order: the successful writes early in the list leave what the later routes need.
ROUTES = [
    route("POST", "/tokens", {CREATE}, 201, {"type": "token", "data": "new"}, writes=True),
    route("GET", "/tokens", {READ}, 200),
    route("GET", "/tokens/m-a", {READ}, 200),
    route("PATCH", "/tokens/m-upd", {UPDATE}, 200, {"metadata": {"k": "v"}}, writes=True,
          content_type="application/merge-patch+json"),
    route("POST", "/tokens/search", {SEARCH}, 200, {"query": "id:m-a"}),
    route("POST", "/tokens/m-a/children/m-b", {READ}, 201, writes=True),
    route("POST", "/tokens/m-a/children", {CREATE, READ}, 201,
          {"type": "token", "data": "child"}, writes=True),
    route("GET", "/tokens/m-a/children", {READ}, 200),
    route("GET", "/tokens/m-c/parents", {READ}, 200),
    route("GET", "/tokens/m-a/graph", {READ}, 200),
    route("POST", "/tokenize", {CREATE}, 200, [{"type": "token", "data": "bulk"}], writes=True),
    route("POST", "/detokenize", {READ}, 200, {"value": "{{ m-a }}"}),
    route("DELETE", "/tokens/m-a/children/m-c", {DELETE}, 204, writes=True),
    route("DELETE", "/tokens/m-del", {DELETE}, 204, writes=True),
]

SUBSETS = [frozenset(c) for n in range(len(TOKEN_PERMISSIONS) + 1)
           for c in itertools.combinations(TOKEN_PERMISSIONS, n)]


TEMPLATES = {  # ROUTES' paths as the document names them, in ROUTES' order
    "/tokens": "/tokens", "/tokens/m-a": "/tokens/{id}", "/tokens/m-upd": "/tokens/{id}",
    "/tokens/m-del": "/tokens/{id}", "/tokens/search": "/tokens/search",
    "/tokens/m-a/children/m-b": "/tokens/{parent_id}/children/{child_id}",
    "/tokens/m-a/children/m-c": "/tokens/{parent_id}/children/{child_id}",
    "/tokens/m-a/children": "/tokens/{parent_id}/children",
    "/tokens/m-c/parents": "/tokens/{id}/parents", "/tokens/m-a/graph": "/tokens/{id}/graph",
    "/tokenize": "/tokenize", "/detokenize": "/detokenize",
}


async def test_the_matrix_covers_every_token_and_graph_operation(client):
    """ROUTES holds every token and graph operation of the served document, each with the
    permissions the document declares (so a new route or a changed declaration cannot slip
    past the matrix)."""
    document = await (await client.get("/openapi.json")).json()
    declared = {(method.upper(), path): frozenset(op["x-permission"])
                for path, item in document["paths"].items()
                if path.startswith(("/tokens", "/tokenize", "/detokenize"))
                for method, op in item.items() if method != "parameters"}
    table = {(r.method, TEMPLATES[r.path]): r.needs for r in ROUTES}
    assert table == declared
    assert len(ROUTES) == len(declared) == 14


async def _call(client, r: Route, headers) -> tuple[int, bytes]:
    data = None if r.body is None else orjson.dumps(r.body)
    h = {**headers, **({"Content-Type": r.content_type} if data is not None else {})}
    resp = await client.request(r.method, r.path, data=data, headers=h)
    return resp.status, await resp.read()


async def _seed(client, admin_headers) -> None:
    for token_id in ("m-a", "m-b", "m-c", "m-upd", "m-del"):
        resp = await client.post("/tokens", json={"id": token_id, "type": "token",
                                                  "data": token_id}, headers=admin_headers)
        assert resp.status == 201, await resp.text()
    resp = await client.post("/tokens/m-a/children/m-c", headers=admin_headers)
    assert resp.status == 201, await resp.text()


@pytest.mark.parametrize("granted", SUBSETS, ids=lambda s: "+".join(sorted(s)) or "none")
async def test_allowed_token_routes_are_exactly_the_granted_permissions(
        client, tenant, admin_headers, granted):
    await _seed(client, admin_headers)
    # A rule's permissions grant too (auth/principal.py): the one rule grants what the
    # application holds, no more; with nothing granted there is no rule.
    rules = [{"container": "/", "transform": "reveal", "permissions": sorted(granted)}]
    caller = key_headers(await make_application(
        client, admin_headers, permissions=granted, rules=rules if granted else None))
    before = await tenant_snapshot(client, tenant.tenant_id)
    for r in ROUTES:
        status, body = await _call(client, r, caller)
        if r.needs <= granted:
            assert status == r.ok, (str(r), status, body[:300])
            if r.writes:
                after = await tenant_snapshot(client, tenant.tenant_id)
                assert before.diff(after), (str(r), "an accepted write changed nothing")
                before = after
        else:
            assert status == 403, (str(r), status, body[:300])
            problem = orjson.loads(body)
            assert problem["status"] == 403 and problem["type"].endswith("/forbidden"), problem
            if r.writes:
                after = await tenant_snapshot(client, tenant.tenant_id)
                assert before.diff(after) == {}, (str(r), "a refused write changed state")
