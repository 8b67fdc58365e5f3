"""Test factories shared by every test module: applications with chosen permissions and rules.

    app = await make_application(client, admin_headers, permissions=["token:read"],
                                 rules=[{"container": "/pci/", "transform": "mask",
                                         "permissions": ["token:read"]}])
    await client.get("/tokens/abc", headers=key_headers(app))
"""

from __future__ import annotations

from collections.abc import Iterable

from vaultgraph.api.typedefs import services_key
from vaultgraph.auth.apikeys import HEADER
from vaultgraph.auth.permissions import TOKEN_PERMISSIONS


async def make_application(client, admin_headers, *, permissions: Iterable[str] = TOKEN_PERMISSIONS,
                           rules: list[dict] | None = None, name: str = "app") -> dict:
    """POST /applications as the tenant administrator; the JSON answer, including its `key`."""
    body: dict = {"name": name, "permissions": list(permissions)}
    if rules is not None:
        body["rules"] = rules
    resp = await client.post("/applications", json=body, headers=admin_headers)
    created = await resp.json()
    assert resp.status == 201, created
    return created


def key_headers(app_json: dict) -> dict[str, str]:
    """The headers that authenticate as the application `make_application` returned."""
    return {HEADER: app_json["key"]}


async def new_tenant(app, name: str = "test"):
    """A new tenant with its administrator key (every permission, reveal on `/`)."""
    return await app[services_key].tenants.create(name)


def database(app):
    """The app's own `Database` (the real Neo4j), for reading stored state directly."""
    return app[services_key].database


def service_env(settings) -> dict[str, str]:
    """The environment of a `vaultgraph serve` subprocess (vaultgraph.testing.service) on this
    run's Neo4j, with the run's key-encryption key and no background sweeps."""
    return {
        "PATH": "/usr/bin:/bin",
        "VAULTGRAPH_NEO4J_URI": settings.neo4j_uri,
        "VAULTGRAPH_NEO4J_USER": settings.neo4j_user,
        "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password(),
        "VAULTGRAPH_NEO4J_DATABASE": settings.neo4j_database,
        "VAULTGRAPH_KEK": settings.kek,
        "VAULTGRAPH_CYPHER_DIR": settings.cypher_dir,
        "VAULTGRAPH_LOG_LEVEL": "WARNING",
        "VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "0",
    }
