"""`serve --workers N` is one service: a key revoked, an application deleted or its permissions
replaced through one worker is refused by every worker from the answer on, however long the
authentication cache keeps a principal (docs/operations.md, "Workers and revocation")."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys

import aiohttp

from vaultgraph.wiring import open_services

from .test_drain import free_port

TRIES = 24  # fresh connections: the kernel spreads them over both workers (all on one: 2^-23)


@contextlib.asynccontextmanager
async def two_workers(settings, tmp_path, **extra_env: str):
    """`vaultgraph serve --workers 2`, once it said it serves (every worker started): its URL.
    `extra_env`: more of the service's environment."""
    port = free_port()
    env = {**os.environ, "VAULTGRAPH_NEO4J_URI": settings.neo4j_uri,
           "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password(),
           "VAULTGRAPH_KEK": settings.kek, "VAULTGRAPH_HOST": "127.0.0.1",
           "VAULTGRAPH_PORT": str(port), "VAULTGRAPH_HOME": str(tmp_path),
           "VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "0", "VAULTGRAPH_LOG_LEVEL": "WARNING",
           "VAULTGRAPH_RATE_LIMIT": "0", "VAULTGRAPH_AUTH_FAILURE_LIMIT": "1000",
           # Far longer than the test: only the shared generation can make the change hold.
           "VAULTGRAPH_AUTH_CACHE_TTL": "600", **extra_env}
    master = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vaultgraph", "serve", "--workers", "2", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        line = await asyncio.wait_for(master.stderr.readline(), 120)
        assert line.decode().startswith(f"serving on http://127.0.0.1:{port} "), line
        base = f"http://127.0.0.1:{port}"
        loop = asyncio.get_running_loop()
        until = loop.time() + 60
        while not await all_ready(base):
            assert loop.time() < until, "not ready"
            await asyncio.sleep(0.1)
        yield base
    finally:
        if master.returncode is None:
            master.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(master.wait(), 30)
            except TimeoutError:
                master.kill()
                await master.wait()


async def all_ready(base: str) -> bool:
    try:
        return await statuses(base, "GET", "/ready") == [200] * TRIES
    except aiohttp.ClientConnectionError:
        return False


async def statuses(base: str, method: str, path: str, key: str | None = None) -> list[int]:
    """The status of `TRIES` requests, each on a new connection."""
    headers = {"SVC-API-KEY": key} if key else {}
    seen = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        for _ in range(TRIES):
            async with http.request(method, base + path, headers=headers) as resp:
                await resp.read()
                seen.append(resp.status)
    return seen


async def test_a_change_through_one_worker_holds_at_once_on_the_other(settings, tmp_path):
    async with open_services(dataclasses.replace(settings)) as services:
        admin = (await services.tenants.create("workers")).key
    async with two_workers(settings, tmp_path) as base, aiohttp.ClientSession(base) as http:
        manage = {"SVC-API-KEY": admin}

        async def application(name: str) -> tuple[str, str]:
            body = {"name": name, "permissions": ["application:read"]}
            async with http.post("/applications", json=body, headers=manage) as resp:
                assert resp.status == 201, await resp.text()
                created = await resp.json()
            assert await statuses(base, "GET", "/applications", created["key"]) == [200] * TRIES
            return created["id"], created["key"]

        # A key revoked: every worker had it cached (above), none accepts it after the 204.
        app_id, key = await application("revoked")
        async with http.get(f"/applications/{app_id}/keys", headers=manage) as resp:
            [key_id] = [k["id"] for k in (await resp.json())["data"]]
        async with http.delete(f"/applications/{app_id}/keys/{key_id}", headers=manage) as resp:
            assert resp.status == 204
        assert await statuses(base, "GET", "/applications", key) == [401] * TRIES

        # An application deleted: its keys are refused everywhere.
        app_id, key = await application("deleted")
        async with http.delete(f"/applications/{app_id}", headers=manage) as resp:
            assert resp.status == 204
        assert await statuses(base, "GET", "/applications", key) == [401] * TRIES

        # A permission taken away: refused everywhere (the key itself still works).
        app_id, key = await application("narrowed")
        body = {"name": "narrowed", "permissions": ["token:read"]}
        async with http.put(f"/applications/{app_id}", json=body, headers=manage) as resp:
            assert resp.status == 200, await resp.text()
        assert await statuses(base, "GET", "/applications", key) == [403] * TRIES
