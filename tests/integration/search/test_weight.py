"""A search weighs its number of terms in the application's rate limit: the request spends
one token as every request does, and the search the rest once its query is planned (a query
refused before then costs one); a weight above the bucket's size costs the whole bucket."""

from __future__ import annotations

import dataclasses

import pytest
from factories import new_tenant
from graph._support import GraphApi

from vaultgraph.app import create_app

BURST = 10


@pytest.fixture
def app(settings):
    # A refill far slower than any test: the bucket holds exactly BURST tokens here.
    return create_app(dataclasses.replace(settings, rate_limit=0.001, rate_burst=BURST),
                      schema_applied=True)


async def remaining(api: GraphApi, query: str, status: int = 200) -> str:
    resp = await api.client.post("/tokens/search", json={"query": query}, headers=api.headers)
    assert resp.status == status, await resp.text()
    if status == 429:
        assert int(resp.headers["Retry-After"]) >= 1
    return resp.headers["RateLimit-Remaining"]


def terms(n: int) -> str:
    return " OR ".join(f"id:t{i:02}" for i in range(n))


async def test_a_search_spends_one_token_a_term(api, client):
    assert await remaining(api, "id:aaa") == str(BURST - 1)
    assert await remaining(api, "type:card AND NOT (id:aaa OR container:/x/)") == str(BURST - 4)
    assert await remaining(api, "type:", 400) == str(BURST - 5)  # refused unplanned: one
    # Seven terms when five remain: refused, and what remained stays (less the request's one).
    assert await remaining(api, terms(7), 429) == str(BURST - 6)
    assert await remaining(api, terms(4)) == "0"
    assert await remaining(api, "id:aaa", 429) == "0"


async def test_a_search_heavier_than_the_bucket_costs_the_bucket(api, client):
    other = await new_tenant(client.server.app, "other")
    heavy = GraphApi(client, {"SVC-API-KEY": other.key})
    assert await remaining(heavy, terms(20)) == "0"
    assert await remaining(heavy, "id:aaa", 429) == "0"
