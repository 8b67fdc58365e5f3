"""Dedup and idempotency across replicas (docs/operations.md): both are held by Neo4j (a lock
node per tenant, type and fingerprint; one entry per application and Idempotency-Key), so
requests spread over two `vaultgraph serve` processes behave as requests to one."""

from __future__ import annotations

import asyncio
import secrets

import aiohttp

from .conftest import two_replicas

CONCURRENT = 40


async def test_one_value_tokenized_through_both_replicas_at_once_is_one_token(settings, graph):
    with two_replicas(settings) as (a, b):
        tenant = a.create_tenant("dedup-across-replicas")
        headers = {"SVC-API-KEY": tenant.key}
        body = {"type": "token", "data": f"same value {secrets.token_hex(8)}",
                "deduplicate_token": True}
        start = asyncio.Event()

        async def create(http: aiohttp.ClientSession, url: str) -> tuple[int, dict]:
            await start.wait()
            async with http.post(f"{url}/tokens", json=body, headers=headers) as resp:
                return resp.status, await resp.json()

        async with aiohttp.ClientSession() as http:
            calls = [asyncio.create_task(create(http, (a, b)[i % 2].url))
                     for i in range(CONCURRENT)]
            await asyncio.sleep(0.1)  # every request waits on the same event
            start.set()
            answers = await asyncio.gather(*calls)

    statuses = sorted(status for status, _ in answers)
    assert statuses == [200] * (CONCURRENT - 1) + [201], answers
    [created] = [token for status, token in answers if status == 201]
    assert {token["id"] for _, token in answers} == {created["id"]}
    assert all(token["_extras"] == {"deduplicated": True}
               for status, token in answers if status == 200)
    assert all(token["data"] == body["data"] for _, token in answers)
    rows = await graph("MATCH (t:Token {tenant_id: $t}) RETURN t.id AS id, "
                       "t.fingerprint AS fingerprint", t=tenant.tenant_id)
    assert rows == [{"id": created["id"], "fingerprint": created["fingerprint"]}]


async def test_an_idempotent_retry_through_the_other_replica_is_a_replay(settings, graph):
    with two_replicas(settings) as (a, b):
        tenant = a.create_tenant("idempotency-across-replicas")
        headers = {"SVC-API-KEY": tenant.key, "Idempotency-Key": secrets.token_hex(16)}
        body = {"type": "token", "data": "retried once"}
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{a.url}/tokens", json=body, headers=headers) as first:
                assert first.status == 201
                assert "Idempotent-Replayed" not in first.headers
                created = await first.json()
            async with http.post(f"{b.url}/tokens", json=body, headers=headers) as retry:
                assert retry.status == 201
                assert retry.headers["Idempotent-Replayed"] == "true"
                assert await retry.json() == created
            async with http.post(f"{b.url}/tokens", json={**body, "data": "another body"},
                                 headers=headers) as other:
                assert other.status == 422
    rows = await graph("MATCH (t:Token {tenant_id: $t}) RETURN t.id AS id", t=tenant.tenant_id)
    assert rows == [{"id": created["id"]}]
