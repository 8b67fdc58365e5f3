"""Helpers for the bulk, idempotency and rate-limit tests: the routes as small calls, and direct
reads of the real Neo4j (the app's own driver)."""

from __future__ import annotations

import io
from typing import Any

from factories import database, key_headers, make_application

# The token tests' test cards and access-rule builder.
from tokens._support import ALL_TOKEN, AMEX, CALLER_WRITTEN, ROUTING, VISA, rule

__all__ = ["AMEX", "CALLER_WRITTEN", "ROUTING", "VISA", "card", "rule"]
PROBLEM_JSON = "application/problem+json"
MASTERCARD = "5555555555554444"


def card(number: str = VISA, **extra: Any) -> dict:
    """A card create request; `extra` adds top-level fields (metadata, id, dedup…)."""
    return {"type": "card", "data": {"number": number}, **extra}



async def application(client, admin_headers, *rules: dict, permissions=ALL_TOKEN,
                      name: str = "app") -> dict[str, str]:
    created = await make_application(client, admin_headers, permissions=permissions,
                                     rules=list(rules), name=name)
    return key_headers(created)


async def call(client, method: str, path: str, headers: dict, *, json: Any = None,
               data: bytes | None = None, expect: int | tuple = 200):
    """(response, JSON body), asserting the status; problems must be problem+json."""
    kwargs: dict = {"headers": headers}
    if data is not None:
        kwargs["data"] = io.BytesIO(data)  # aiohttp warns on large raw bytes
        kwargs["headers"] = {**headers, "Content-Type": "application/json"}
    else:
        kwargs["json"] = json
    resp = await client.request(method, path, **kwargs)
    text = await resp.text()
    wanted = expect if isinstance(expect, tuple) else (expect,)
    assert resp.status in wanted, (resp.status, text)
    if resp.status >= 400 and resp.content_type == PROBLEM_JSON:
        body = await resp.json(content_type=PROBLEM_JSON)
        assert body["status"] == resp.status
        # Every problem names its request's trace id; the rest is compared across requests.
        assert body.pop("trace_id") == resp.headers["SVC-TRACE-ID"]
        return resp, body
    return resp, (await resp.json() if text else None)


async def cypher(client, query: str, **params: Any) -> list[dict]:
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(query, params, database_=db.database)
    return [record.data() for record in records]


async def token_count(client, tenant_id: str) -> int:
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t}) RETURN count(t) AS n",
                        t=tenant_id)
    return rows[0]["n"]
