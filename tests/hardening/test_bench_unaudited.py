"""The benchmark's audit-off service (bench/unaudited, `make bench`'s on/off comparison): with
its folder on PYTHONPATH every worker of `serve --workers 2` serves without storing the trail,
and without it the same requests are stored as ever. Were the switch to miss a worker, the
comparison would measure the trail on both sides."""

from __future__ import annotations

import dataclasses
import os

import aiohttp
import neo4j
from factories import audit_tenant

from vaultgraph.settings import PROJECT_ROOT
from vaultgraph.wiring import open_services

from .test_workers import TRIES, two_workers

UNAUDITED = str(PROJECT_ROOT / "bench" / "unaudited")


async def _events(settings, tenant_id: str) -> int:
    driver = neo4j.AsyncGraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.resolved_neo4j_password()))
    try:
        records, _, _ = await driver.execute_query(
            "MATCH (e:AuditEvent) WHERE e.tenant_id = $tenant "
            "OR (e.tenant_key = $tk AND e.tenant_rest = $tr) RETURN count(e) AS n",
            tenant=tenant_id, **audit_tenant(tenant_id), database_=settings.neo4j_database)
        return records[0]["n"]
    finally:
        await driver.close()


async def _use(base: str, key: str) -> None:
    """A create, then reads of it on fresh connections (the kernel spreads them over both
    workers)."""
    headers = {"SVC-API-KEY": key}
    async with aiohttp.ClientSession(base) as http:
        async with http.post("/tokens", json={"type": "token", "data": "x"},
                             headers=headers) as resp:
            assert resp.status == 201, await resp.text()
            token_id = (await resp.json())["id"]
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(base, connector=connector) as http:
        for _ in range(TRIES):
            async with http.get(f"/tokens/{token_id}", headers=headers) as resp:
                assert resp.status == 200, await resp.text()


async def test_every_worker_serves_without_the_trail_only_when_asked(settings, tmp_path):
    async with open_services(dataclasses.replace(settings)) as services:
        off = await services.tenants.create("unaudited")
        on = await services.tenants.create("audited")
    path = os.pathsep.join(filter(None, [UNAUDITED, os.environ.get("PYTHONPATH")]))
    async with two_workers(settings, tmp_path / "off", PYTHONPATH=path) as base:
        await _use(base, off.key)
    assert await _events(settings, off.tenant_id) == 0
    async with two_workers(settings, tmp_path / "on") as base:
        await _use(base, on.key)
    assert await _events(settings, on.tenant_id) == 1 + TRIES
