"""Helpers for the token tests: the API as a small client, and direct reads of Neo4j.

Nothing here stands in for the database: `cypher` runs on the app's own driver, against the
real Neo4j the suite starts.
"""

from __future__ import annotations

from typing import Any

import orjson
from factories import database

MERGE_PATCH = "application/merge-patch+json"
PROBLEM_JSON = "application/problem+json"
PROBLEM_KEYS = {"type", "title", "status", "detail"}

# Values that pass every check of their type (Luhn, ABA checksum, SSA ranges).
VISA = "4242424242424242"
MASTERCARD = "5555555555554444"
AMEX = "378282246310005"
DISCOVER = "6011111111111117"
ROUTING = "021000021"
ACCOUNT = "73920485617"
SSN = "512-63-0947"

ALL_TOKEN = ["token:create", "token:read", "token:update", "token:delete"]

# A create request's fields that render an expression its caller wrote through Liquid, one at
# a time (two filters: no shape rendered without Liquid).
CALLER_WRITTEN = [
    {"fingerprint_expression": "{{ data.number | last4 | upcase }}"},
    {"search_indexes": ["{{ data.number | last4 | upcase }}"]},
    {"mask": {"number": "{{ data.number | last4 | upcase }}"}},
    {"id": "card-{{ data.number | last4 | upcase }}"},
]
# The same fields in shapes rendered without Liquid (a look-up, or one of the vault's filters).
CALLER_WRITTEN_DIRECT = [
    {"fingerprint_expression": "{{ data.number | last4 }}"},
    {"search_indexes": ["{{ data.number }}"]},
    {"mask": {"number": "{{ data.number | card_mask }}", "month": "{{ data.expiration_month }}"}},
    {"id": "card-{{ data.number | last4 }}"},
]


def rule(container: str, transform: str, permissions=ALL_TOKEN, priority: int = 0) -> dict:
    """An access rule (docs/security.md) as POST /applications takes it."""
    return {"description": f"{transform} {container}", "priority": priority,
            "container": container, "transform": transform, "permissions": list(permissions)}


def card(number: str = VISA, **extra: Any) -> dict:
    return {"type": "card", "data": {"number": number, **extra}}


class TokenApi:
    """The token routes, each asserting the expected status and returning the JSON body."""

    def __init__(self, client, headers: dict[str, str]):
        self.client = client
        self.headers = headers

    def _h(self, headers):
        return self.headers if headers is None else headers

    async def create(self, body: dict, *, headers=None, expect: int | tuple = 201) -> dict:
        resp = await self.client.post("/tokens", json=body, headers=self._h(headers))
        return await expect_status(resp, expect)

    async def get(self, token_id: str, *, headers=None, expect: int = 200) -> dict:
        resp = await self.client.get(f"/tokens/{token_id}", headers=self._h(headers))
        return await expect_status(resp, expect)

    async def list(self, params=None, *, headers=None, expect: int = 200) -> dict:
        resp = await self.client.get("/tokens", params=params or {}, headers=self._h(headers))
        return await expect_status(resp, expect)

    async def list_all(self, params=None, *, headers=None, size: int = 100) -> list[dict]:
        """Every page of a listing, following `next` until it is null."""
        items: list[dict] = []
        start = None
        while True:
            query = [*(params or []), ("size", str(size))]
            if start:
                query.append(("start", start))
            page = await self.list(query, headers=headers)
            items.extend(page["data"])
            start = page["pagination"]["next"]
            if start is None:
                return items

    async def ids(self, params=None, *, headers=None, size: int = 100) -> list[str]:
        return [t["id"] for t in await self.list_all(params, headers=headers, size=size)]

    async def patch(self, token_id: str, body: Any, *, headers=None, expect: int = 200,
                    content_type: str = MERGE_PATCH) -> dict:
        resp = await self.client.patch(
            f"/tokens/{token_id}", data=orjson.dumps(body),
            headers={**self._h(headers), "Content-Type": content_type})
        return await expect_status(resp, expect)

    async def delete(self, token_id: str, *, headers=None, expect: int = 204) -> dict | None:
        resp = await self.client.delete(f"/tokens/{token_id}", headers=self._h(headers))
        return await expect_status(resp, expect)


async def expect_status(resp, expect: int | tuple) -> Any:
    wanted = expect if isinstance(expect, tuple) else (expect,)
    text = await resp.text()
    assert resp.status in wanted, (resp.status, text)
    if resp.status == 204:
        assert text == ""
        return None
    if resp.status >= 400:
        assert resp.content_type == PROBLEM_JSON, resp.content_type
        body = await resp.json(content_type=PROBLEM_JSON)
        assert PROBLEM_KEYS <= set(body)
        assert body["status"] == resp.status
        # The request's own trace id: checked, then set apart so that answers to different
        # requests compare equal in everything else.
        assert body.pop("trace_id") == resp.headers["SVC-TRACE-ID"]
        return body
    assert resp.content_type == "application/json"
    return await resp.json()


def assert_names(problem: dict, field: str) -> None:
    """A 400 problem whose `errors` map names `field`."""
    assert problem["status"] == 400, problem
    assert field in problem.get("errors", {}), problem


async def cypher(client, query: str, **params: Any) -> list[dict]:
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(query, params, database_=db.database)
    return [record.data() for record in records]
