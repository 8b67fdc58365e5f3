"""Fixtures for the search tests: callers with chosen rules, a second tenant, and the search
route as a small client over the real Neo4j."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from factories import key_headers, make_application, new_tenant
from graph._support import GraphApi, expect

ALL_TOKEN = ["token:create", "token:read", "token:update", "token:delete", "token:search"]


def rule(container: str, transform: str = "reveal", permissions=ALL_TOKEN,
         priority: int = 0) -> dict:
    return {"description": f"{transform} {container}", "priority": priority,
            "container": container, "transform": transform, "permissions": list(permissions)}


class SearchApi(GraphApi):
    async def search(self, query: str, expect_status: int = 200, **extra: Any) -> Any:
        return await expect(await self.client.post(
            "/tokens/search", json={"query": query, **extra}, headers=self.headers),
            expect_status)

    async def found(self, query: str, **extra: Any) -> list[str]:
        """The ids of one page of matches, in the order given."""
        return [t["id"] for t in (await self.search(query, **extra))["data"]]

    async def every(self, query: str, size: int) -> list[str]:
        """The ids of every page, following `next` to the end."""
        out: list[str] = []
        start = None
        while True:
            page = await self.search(query, size=size, start=start)
            assert len(page["data"]) <= size
            out += [t["id"] for t in page["data"]]
            start = page["pagination"]["next"]
            if start is None:
                return out


@pytest.fixture(scope="session")
def settings(settings):
    return dataclasses.replace(settings, expiry_sweep_interval=3600.0)


@pytest.fixture
def api(client, admin_headers) -> SearchApi:
    """The tenant administrator: every permission, reveal on `/`."""
    return SearchApi(client, admin_headers)


@pytest.fixture
def caller(client, admin_headers):
    async def make(*rules: dict, permissions=ALL_TOKEN, name: str = "app") -> SearchApi:
        created = await make_application(client, admin_headers, permissions=permissions,
                                         rules=list(rules), name=name)
        return SearchApi(client, key_headers(created))

    return make


@pytest.fixture
async def other_tenant(client) -> SearchApi:
    other = await new_tenant(client.server.app, "other")
    return SearchApi(client, {"SVC-API-KEY": other.key})
