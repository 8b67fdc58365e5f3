"""Fixtures over the real Neo4j that `make test` starts (never a mock of it).

Every test gets its own tenant, so tests never see each other's data.
"""

from __future__ import annotations

import dataclasses
import secrets

import pytest

from vaultgraph.app import create_app
from vaultgraph.crypto import KeyRing
from vaultgraph.settings import Settings


@pytest.fixture(scope="session")
def settings() -> Settings:
    base = Settings.from_env()
    try:
        base.resolved_neo4j_password()
    except ValueError:
        pytest.fail("no Neo4j for the tests: run them with `make test`, which starts one")
    # One fresh key-encryption key for the whole run: tests never depend on a file on disk.
    # Its version is the run's own, so the start-up key check (server.py) of a service this run
    # starts looks only at tenants this run created, not at earlier runs' under other keys.
    key = KeyRing.generate_spec().partition(":")[2]
    return dataclasses.replace(base, kek=f"run{secrets.token_hex(6)}:{key}", log_level="WARNING")


@pytest.fixture
def app(settings):
    return create_app(settings)


@pytest.fixture
async def client(aiohttp_client, app):
    return await aiohttp_client(app)


@pytest.fixture
async def tenant(client):
    """A new tenant with its administrator key (every permission, reveal on `/`)."""
    from factories import new_tenant

    app = client.server.app
    return await new_tenant(app, "test")


@pytest.fixture
def admin_headers(tenant) -> dict[str, str]:
    return {"SVC-API-KEY": tenant.key}
