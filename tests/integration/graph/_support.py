"""Helpers for the token graph tests: the graph routes as a small client, and direct reads of
Neo4j through the app's own driver (the real database the suite starts; nothing stands in)."""

from __future__ import annotations

from typing import Any

from factories import database

PROBLEM_JSON = "application/problem+json"
VISA = "4242424242424242"
MASTERCARD = "5555555555554444"
ROUTING = "021000021"
ACCOUNT = "73920485617"


def customer(name: str = "Ada", **extra: Any) -> dict:
    return {"type": "token", "data": {"name": name}, **extra}


def card(number: str = VISA, **extra: Any) -> dict:
    return {"type": "card", "data": {"number": number, "expiration_month": 12,
                                     "expiration_year": 2030}, **extra}


def bank(**extra: Any) -> dict:
    return {"type": "bank", "data": {"routing_number": ROUTING, "account_number": ACCOUNT},
            **extra}


async def expect(resp, status: int) -> Any:
    text = await resp.text()
    assert resp.status == status, (resp.status, text)
    if resp.status == 204 or not text:
        return None
    body = await resp.json(content_type=None)
    if resp.status >= 400 and isinstance(body, dict):
        # The request's own trace id: checked here, then set apart so that answers to
        # different requests compare equal in everything else.
        assert body.pop("trace_id") == resp.headers["SVC-TRACE-ID"]
    return body


class GraphApi:
    """Token and graph routes as one caller (its key headers), each asserting the status."""

    def __init__(self, client, headers: dict[str, str]):
        self.client = client
        self.headers = headers

    def as_(self, headers: dict[str, str]) -> GraphApi:
        return GraphApi(self.client, headers)

    async def create(self, body: dict, expect_status: int = 201) -> dict:
        return await expect(await self.client.post("/tokens", json=body, headers=self.headers),
                            expect_status)

    async def get(self, token_id: str, expect_status: int = 200) -> Any:
        return await expect(await self.client.get(f"/tokens/{token_id}", headers=self.headers),
                            expect_status)

    async def delete(self, token_id: str, expect_status: int = 204) -> Any:
        return await expect(await self.client.delete(f"/tokens/{token_id}",
                                                     headers=self.headers), expect_status)

    async def link(self, parent_id: str, child_id: str, expect_status: int = 201) -> Any:
        return await expect(await self.client.post(f"/tokens/{parent_id}/children/{child_id}",
                                                   headers=self.headers), expect_status)

    async def unlink(self, parent_id: str, child_id: str, expect_status: int = 204) -> Any:
        return await expect(await self.client.delete(
            f"/tokens/{parent_id}/children/{child_id}", headers=self.headers), expect_status)

    async def create_child(self, parent_id: str, body: Any, expect_status: int = 201) -> Any:
        return await expect(await self.client.post(f"/tokens/{parent_id}/children", json=body,
                                                   headers=self.headers), expect_status)

    async def children(self, parent_id: str, params=None, expect_status: int = 200) -> Any:
        return await expect(await self.client.get(f"/tokens/{parent_id}/children",
                                                  params=params or {}, headers=self.headers),
                            expect_status)

    async def parents(self, token_id: str, params=None, expect_status: int = 200) -> Any:
        return await expect(await self.client.get(f"/tokens/{token_id}/parents",
                                                  params=params or {}, headers=self.headers),
                            expect_status)

    async def graph(self, token_id: str, params=None, expect_status: int = 200) -> Any:
        return await expect(await self.client.get(f"/tokens/{token_id}/graph",
                                                  params=params or {}, headers=self.headers),
                            expect_status)

    async def all_pages(self, route, token_id: str, params=(), size: int = 2) -> list[dict]:
        """Every page of a children or parents listing, following `next` to the end."""
        items: list[dict] = []
        start = None
        while True:
            query = [*params, ("size", str(size))] + ([("start", start)] if start else [])
            page = await route(token_id, query)
            assert len(page["data"]) <= size
            items.extend(page["data"])
            start = page["pagination"]["next"]
            if start is None:
                return items


async def cypher(client, statement: str, **params: Any) -> list[dict]:
    """A test's own read or set-up statement, on the app's driver."""
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(statement, params, database_=db.database)
    return [dict(r) for r in records]


async def links_between(client, tenant_id: str, parent_id: str, child_id: str) -> int:
    rows = await cypher(
        client, "MATCH (:Token {tenant_id: $t, id: $p})-[r:PARENT_OF]->"
                "(:Token {tenant_id: $t, id: $c}) RETURN count(r) AS n",
        t=tenant_id, p=parent_id, c=child_id)
    return rows[0]["n"]


async def expire(client, tenant_id: str, *token_ids: str) -> None:
    """Move tokens' expiry into the past (the API refuses a past expires_at, rightly)."""
    await cypher(client, "MATCH (t:Token {tenant_id: $t}) WHERE t.id IN $ids "
                         "SET t.expires_at = datetime() - duration('PT1M')",
                 t=tenant_id, ids=list(token_ids))
