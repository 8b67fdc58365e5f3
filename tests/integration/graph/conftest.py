"""Fixtures for the token graph tests: callers with chosen access rules.

The expiry sweeper is global (every tenant), so here its background run is pushed an hour away
and the tests that need a sweep call it on demand.
"""

from __future__ import annotations

import dataclasses

import pytest
from factories import key_headers, make_application

from ._support import GraphApi

READ = ["token:read"]
ALL_TOKEN = ["token:create", "token:read", "token:update", "token:delete"]


def rule(container: str, transform: str = "reveal", permissions=ALL_TOKEN,
         priority: int = 0) -> dict:
    return {"description": f"{transform} {container}", "priority": priority,
            "container": container, "transform": transform, "permissions": list(permissions)}


@pytest.fixture(scope="session")
def settings(settings):
    return dataclasses.replace(settings, expiry_sweep_interval=3600.0)


@pytest.fixture
def api(client, admin_headers) -> GraphApi:
    """The tenant administrator: every permission, reveal on `/`."""
    return GraphApi(client, admin_headers)


@pytest.fixture
def caller(client, admin_headers):
    """An application of the test's tenant with the given rules, as a GraphApi."""

    async def make(*rules: dict, permissions=ALL_TOKEN, name: str = "app") -> GraphApi:
        created = await make_application(client, admin_headers, permissions=permissions,
                                         rules=list(rules), name=name)
        return GraphApi(client, key_headers(created))

    return make


@pytest.fixture
async def other_tenant(client) -> GraphApi:
    """The administrator of another tenant."""
    from factories import new_tenant

    app = client.server.app
    other = await new_tenant(app, "other")
    return GraphApi(client, {"SVC-API-KEY": other.key})
