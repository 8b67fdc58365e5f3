"""Fixtures for the token tests: the API as the tenant administrator, and applications whose
access rules reveal, mask or redact."""

from __future__ import annotations

import pytest
from factories import key_headers, make_application

from ._support import ALL_TOKEN, TokenApi, rule


@pytest.fixture
def api(client, admin_headers) -> TokenApi:
    """The API as the tenant's administrator: every permission, reveal on `/`."""
    return TokenApi(client, admin_headers)


@pytest.fixture
def app_headers(client, admin_headers):
    """Make an application in the test's tenant and return its key headers."""

    async def make(*rules: dict, permissions=ALL_TOKEN, name: str = "app") -> dict[str, str]:
        created = await make_application(client, admin_headers, permissions=permissions,
                                         rules=list(rules), name=name)
        return key_headers(created)

    return make


@pytest.fixture
async def revealing(app_headers):
    return await app_headers(rule("/", "reveal"), name="revealing")


@pytest.fixture
async def masking(app_headers):
    return await app_headers(rule("/", "mask"), name="masking")


@pytest.fixture
async def redacting(app_headers):
    return await app_headers(rule("/", "redact"), name="redacting")


@pytest.fixture
async def bank_only(app_headers):
    """Reads (reveals) only tokens under /bank/."""
    return await app_headers(rule("/bank/", "reveal"), name="bank only")


@pytest.fixture
async def other_tenant_api(client):
    """The API as the administrator of another tenant."""
    from factories import new_tenant

    app = client.server.app
    other = await new_tenant(app, "other")
    return TokenApi(client, {"SVC-API-KEY": other.key})
