"""The search tests reuse the token graph tests' fixtures (callers with chosen rules, a second
tenant, the administrator); the search route is three helpers over their GraphApi."""

from __future__ import annotations

from typing import Any

from graph._support import GraphApi, expect
from graph.conftest import api, caller, other_tenant, settings  # noqa: F401 - fixtures

SEARCH = "token:search"
ALL_TOKEN = ["token:create", "token:read", "token:update", "token:delete", SEARCH]


def rule(container: str, transform: str = "reveal", permissions=ALL_TOKEN) -> dict:
    return {"description": f"{transform} {container}", "priority": 0, "container": container,
            "transform": transform, "permissions": list(permissions)}


async def search(client: GraphApi, query: str, expect_status: int = 200, **extra: Any) -> Any:
    return await expect(await client.client.post(
        "/tokens/search", json={"query": query, **extra}, headers=client.headers), expect_status)


async def found(client: GraphApi, query: str, **extra: Any) -> list[str]:
    """The ids of one page of matches, in the order given."""
    return [t["id"] for t in (await search(client, query, **extra))["data"]]


async def every(client: GraphApi, query: str, size: int) -> list[str]:
    """The ids of every page, following `next` to the end."""
    out: list[str] = []
    start = None
    while True:
        page = await search(client, query, size=size, start=start)
        assert len(page["data"]) <= size
        out += [t["id"] for t in page["data"]]
        start = page["pagination"]["next"]
        if start is None:
            return out
