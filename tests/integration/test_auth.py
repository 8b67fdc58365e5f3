"""Authentication and authorization: every route declares a permission, every management route
answers 401 / 403 / 404 the same way for every kind of wrong caller, and an application may call
exactly the routes its permissions grant.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from dataclasses import dataclass

import pytest
from aiohttp import web
from factories import key_headers, make_application, new_tenant
from multidict import CIMultiDict

from vaultgraph.app import create_app
from vaultgraph.auth.permissions import (
    ALL_PERMISSIONS,
    APPLICATION_CREATE,
    APPLICATION_DELETE,
    APPLICATION_READ,
    APPLICATION_UPDATE,
    AUTHENTICATED,
    MANAGEMENT_PERMISSIONS,
    PUBLIC,
    declared,
)

UNAUTHORIZED = {
    "type": "https://vaultgraph.dev/problems/unauthorized",
    "title": "Unauthorized",
    "status": 401,
    "detail": "A valid API key is required in the SVC-API-KEY header.",
}


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    permission: str | None  # None: any valid key
    body: dict | None = None
    ok: int = 200

    def url(self, app_id: str, key_id: str) -> str:
        return self.path.format(id=app_id, key_id=key_id)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


# Ordered so that a caller can run them all against one target: deletions last.
ROUTES = [
    Route("GET", "/applications", APPLICATION_READ),
    Route("GET", "/applications/{id}", APPLICATION_READ),
    Route("GET", "/applications/{id}/keys", APPLICATION_READ),
    Route("GET", "/applications/self", None),
    Route("POST", "/applications", APPLICATION_CREATE, {"name": "new"}, 201),
    Route("PUT", "/applications/{id}", APPLICATION_UPDATE, {"name": "renamed"}),
    Route("POST", "/applications/{id}/keys", APPLICATION_UPDATE, None, 201),
    Route("DELETE", "/applications/{id}/keys/{key_id}", APPLICATION_UPDATE, None, 204),
    Route("DELETE", "/applications/{id}", APPLICATION_DELETE, None, 204),
]


@pytest.fixture
async def other_tenant(client):
    app = client.server.app
    return await new_tenant(app, "other")


async def _target(client, admin_headers) -> tuple[str, str]:
    """An application with no access at all (anyone may manage it) and the id of its key."""
    target = await make_application(client, admin_headers, permissions=[], name="target")
    keys = await (await client.get(f"/applications/{target['id']}/keys",
                                   headers=admin_headers)).json()
    return target["id"], keys["data"][0]["id"]


async def _call(client, route: Route, headers: dict, app_id: str, key_id: str):
    resp = await client.request(route.method, route.url(app_id, key_id), json=route.body,
                                headers=headers)
    body = await resp.json() if resp.status != 204 else None
    if isinstance(body, dict) and "trace_id" in body:  # per request: compared apart
        assert body.pop("trace_id") == resp.headers["SVC-TRACE-ID"]
    return resp.status, body


# ---- declarations --------------------------------------------------------------------------

def test_every_route_declares_its_permission(app):
    undeclared = []
    for route in app.router.routes():
        needed = declared(route.handler)
        ok = needed in (PUBLIC, AUTHENTICATED) or (
            isinstance(needed, tuple) and needed and set(needed) <= set(ALL_PERMISSIONS))
        if not ok:
            undeclared.append(f"{route.method} {route.resource.canonical}")
    assert not undeclared, f"routes without @requires/@public/@authenticated: {undeclared}"


def test_the_route_table_below_covers_every_management_route(app):
    served = {(r.method, r.resource.canonical) for r in app.router.routes()
              if r.resource.canonical.startswith("/applications") and r.method != "HEAD"}
    assert served == {(r.method, r.path) for r in ROUTES}


async def test_an_undeclared_route_is_refused_even_to_the_administrator(aiohttp_client,
                                                                        settings):
    async def undeclared(request):
        return web.json_response({"leak": True})

    app = create_app(settings)
    app.router.add_get("/undeclared", undeclared)
    client = await aiohttp_client(app)
    tenant = await new_tenant(app, "test")
    resp = await client.get("/undeclared", headers={"SVC-API-KEY": tenant.key})
    assert resp.status == 403


# ---- 401: one body for every missing or wrong key ------------------------------------------

async def test_every_bad_key_gets_the_same_401(client, admin_headers):
    revoked = await make_application(client, admin_headers, permissions=list(ALL_PERMISSIONS))
    key_id = (await (await client.get("/applications/self", headers=key_headers(revoked)))
              .json())["key_id"]
    assert (await client.delete(f"/applications/{revoked['id']}/keys/{key_id}",
                                headers=admin_headers)).status == 204
    deleted = await make_application(client, admin_headers)
    assert (await client.delete(f"/applications/{deleted['id']}",
                                headers=admin_headers)).status == 204
    key = admin_headers["SVC-API-KEY"]
    variants = {
        "missing": {},
        "empty": {"SVC-API-KEY": ""},
        "malformed": {"SVC-API-KEY": "not-a-key"},
        "bearer": {"SVC-API-KEY": f"Bearer {key}"},
        "truncated": {"SVC-API-KEY": key[:-1]},
        "unknown": {"SVC-API-KEY": "vg_" + "A" * 43},
        "other header": {"Authorization": key},
        "revoked": key_headers(revoked),
        "deleted application": key_headers(deleted),
        # Sent twice, the key is ambiguous: refused whichever comes first (the first was taken).
        "twice, the good one first": CIMultiDict([("SVC-API-KEY", key),
                                                  ("SVC-API-KEY", "vg_" + "A" * 43)]),
        "twice, the good one last": CIMultiDict([("SVC-API-KEY", "vg_" + "A" * 43),
                                                 ("SVC-API-KEY", key)]),
        "the good one twice": CIMultiDict([("SVC-API-KEY", key), ("SVC-API-KEY", key)]),
    }
    for name, headers in variants.items():
        resp = await client.get("/applications/self", headers=headers)
        assert resp.status == 401, name
        assert resp.content_type == "application/problem+json"
        assert await resp.json() == {**UNAUTHORIZED, "trace_id": resp.headers["SVC-TRACE-ID"]}
    resp = await client.get("/applications/self", params={"SVC-API-KEY": key})
    assert resp.status == 401  # never from the query string


# ---- every management route, every kind of wrong caller ------------------------------------

@pytest.mark.parametrize("route", ROUTES, ids=str)
async def test_route_refuses_every_wrong_caller(client, admin_headers, other_tenant, route):
    app_id, key_id = await _target(client, admin_headers)

    revoked = await make_application(client, admin_headers, permissions=MANAGEMENT_PERMISSIONS)
    revoked_key = (await (await client.get("/applications/self", headers=key_headers(revoked)))
                   .json())["key_id"]
    await client.delete(f"/applications/{revoked['id']}/keys/{revoked_key}",
                        headers=admin_headers)
    for headers in ({}, {"SVC-API-KEY": "garbage"}, {"SVC-API-KEY": "vg_" + "B" * 43},
                    key_headers(revoked)):
        assert await _call(client, route, headers, app_id, key_id) == (401, UNAUTHORIZED)

    lacking = await make_application(client, admin_headers, permissions=[
        p for p in MANAGEMENT_PERMISSIONS if route.permission not in (None, p)])
    status, body = await _call(client, route, key_headers(lacking), app_id, key_id)
    if route.permission is None:
        assert status == route.ok  # any valid key may ask who it is
    else:
        assert status == 403
        assert body["type"].endswith("/forbidden")

    # Another tenant's administrator: the target is exactly as unknown as a random id.
    theirs = {"SVC-API-KEY": other_tenant.key}
    status, body = await _call(client, route, theirs, app_id, key_id)
    if "{id}" in route.path:
        assert (status, body) == await _call(client, route, theirs, str(uuid.uuid4()),
                                             str(uuid.uuid4()))
        assert status == 404
    elif route.method == "GET" and route.path == "/applications":
        assert status == 200
        assert app_id not in [a["id"] for a in body["data"]]
    else:  # creating, or asking who it is: always in the caller's own tenant
        assert status == route.ok
        assert body["tenant_id"] == other_tenant.tenant_id

    # And the target survived all of it.
    assert (await client.get(f"/applications/{app_id}", headers=admin_headers)).status == 200


# ---- the permission matrix -----------------------------------------------------------------

SUBSETS = [frozenset(c) for n in range(len(MANAGEMENT_PERMISSIONS) + 1)
           for c in itertools.combinations(MANAGEMENT_PERMISSIONS, n)]


@pytest.mark.parametrize("granted", SUBSETS, ids=lambda s: "+".join(sorted(s)) or "none")
async def test_allowed_routes_are_exactly_the_granted_permissions(client, admin_headers,
                                                                  granted):
    caller = key_headers(await make_application(client, admin_headers, permissions=granted))
    app_id, key_id = await _target(client, admin_headers)
    allowed = set()
    for route in ROUTES:
        status, _ = await _call(client, route, caller, app_id, key_id)
        if route.permission is None or route.permission in granted:
            assert status == route.ok, (str(route), status)
            allowed.add(route.permission)
        else:
            assert status == 403, (str(route), status)
    assert allowed - {None} == granted


# ---- the authentication cache --------------------------------------------------------------

async def test_another_replica_stops_a_revoked_key_within_the_cache_ttl(
        client, aiohttp_client, settings, admin_headers):
    replica = await aiohttp_client(create_app(settings))
    created = await make_application(client, admin_headers, permissions=[])
    headers = key_headers(created)
    assert (await replica.get("/applications/self", headers=headers)).status == 200
    assert (await client.delete(f"/applications/{created['id']}",
                                headers=admin_headers)).status == 204
    assert (await client.get("/applications/self", headers=headers)).status == 401  # at once
    # The replica's cached entry lapses after the TTL: poll its answer (bounded) until it does
    # (meanwhile it may answer 200, or 404 once the application itself is gone).
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.auth_cache_ttl + 30
    while (status := (await replica.get("/applications/self", headers=headers)).status) != 401:
        assert status in (200, 404), status
        assert loop.time() < deadline, "the revoked key still works on the replica"
        await asyncio.sleep(0.05)
