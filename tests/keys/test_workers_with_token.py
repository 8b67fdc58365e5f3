"""`serve --workers 2` with the key-encryption key in the token: each worker is a process with
its own pool of sessions over one SoftHSM2 token, and cold tenants created and read at once
through both workers (the kernel spreads fresh connections over them) all answer, with no
worker lost."""

from __future__ import annotations

import asyncio
import signal
import sys

import aiohttp
from hardening.test_drain import free_port

from vaultgraph.wiring import open_services

from .conftest import vault_env

TENANTS = 64
SERVING = {  # besides the token's settings: no limit on the test's own bursts
    "VAULTGRAPH_HOST": "127.0.0.1", "VAULTGRAPH_PKCS11_SESSIONS": "4",
    "VAULTGRAPH_RATE_LIMIT": "0", "VAULTGRAPH_AUTH_FAILURE_LIMIT": "1000",
    "VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "0"}


async def _create_then_get(base: str, key: str, n: int) -> tuple[int, int, dict | str | None]:
    """A token created, then read, each on a connection of its own (a refusal's detail)."""
    headers = {"SVC-API-KEY": key}
    async with aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(force_close=True)) \
            as http:
        async with http.post("/tokens", json={"type": "token", "data": {"n": n}},
                             headers=headers) as resp:
            body = await resp.json()
            if resp.status != 201:
                return resp.status, 0, body.get("detail")
            token_id = body["id"]
        async with http.get(f"/tokens/{token_id}", headers=headers) as resp:
            return 201, resp.status, (await resp.json()).get("data")


async def test_cold_tenants_through_two_workers_each_with_a_pool(hsm_settings, tmp_path):
    async with open_services(hsm_settings) as services:  # wrapped by the token's key
        keys = [(await services.tenants.create(f"workers {n}")).key for n in range(TENANTS)]
    port = free_port()
    master = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vaultgraph", "serve", "--workers", "2",
        env={**vault_env(hsm_settings, tmp_path), **SERVING, "VAULTGRAPH_PORT": str(port)},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        line = await asyncio.wait_for(master.stderr.readline(), 120)  # every worker started
        assert line.decode().startswith(f"serving on http://127.0.0.1:{port} "), line
        answers = await asyncio.gather(*(
            _create_then_get(f"http://127.0.0.1:{port}", key, n) for n, key in enumerate(keys)))
    finally:
        if master.returncode is None:
            master.send_signal(signal.SIGTERM)
        said = (await asyncio.wait_for(master.stderr.read(), 60)).decode()  # the workers' logs
        await asyncio.wait_for(master.wait(), 60)
    assert answers == [(201, 200, {"n": n}) for n in range(TENANTS)], said
    assert master.returncode == 0, said  # no worker died (a native crash is 128 + signal)
