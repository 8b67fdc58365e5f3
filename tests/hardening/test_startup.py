"""Issue #18.2 (start-up that lies) and #18.3 (cold and recovering pools): the server listens at
once, says ready only when it is, and names a configuration error instead of answering 500s."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import subprocess
import sys
import time

import aiohttp

from vaultgraph.crypto import KeyRing
from vaultgraph.logging_setup import CoalescingFilter
from vaultgraph.wiring import open_services

from .conftest import BoltProxy, neo4j_address, wait_ready

CARD = {"type": "card", "data": {"number": "4242424242424242"}}


async def test_listens_at_once_while_neo4j_is_down_and_recovers_when_it_returns(
        serve, tenant, settings):
    proxy = BoltProxy(*neo4j_address(settings))
    proxy.reserve()  # nothing listens there yet: Neo4j is "down"
    served = await serve(neo4j_uri=proxy.uri)
    async with aiohttp.ClientSession(f"http://127.0.0.1:{served.port}") as http:
        async with http.get("/health") as resp:
            assert resp.status == 200
        async with http.get("/ready") as resp:
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "1"
            assert (await resp.json())["detail"] == "The service is starting."
        async with http.get("/tokens", headers={"SVC-API-KEY": tenant.key}) as resp:
            assert resp.status == 503
            assert "Retry-After" in resp.headers
        await proxy.up()
        try:
            back = time.monotonic()
            await wait_ready(served)
            async with http.post("/tokens", json=CARD,
                                 headers={"SVC-API-KEY": tenant.key}) as resp:
                assert resp.status == 201
            first_ok = time.monotonic() - back
            print(f"first 201 after Neo4j returned: {first_ok:.2f} s")
            await proxy.down()  # an outage while serving: 503s, never a hang past the deadline
            async with http.get("/tokens", headers={"SVC-API-KEY": tenant.key}) as resp:
                assert resp.status == 503
            await proxy.up()
            back = time.monotonic()
            status = 503
            while status != 200 and time.monotonic() - back < 20:
                async with http.get("/tokens", headers={"SVC-API-KEY": tenant.key}) as resp:
                    status = resp.status
            print(f"first 200 after Neo4j came back: {time.monotonic() - back:.2f} s")
            assert status == 200
        finally:
            await proxy.down()


async def test_a_wrong_neo4j_password_is_a_503_and_one_clear_line(serve, caplog):
    # Another user than the real one, so Neo4j's lock-out of a user after failed logins never
    # touches the account the rest of the suite uses.
    with caplog.at_level(logging.WARNING):
        served = await serve(neo4j_user="no-such-user", neo4j_password="wrong")
        async with aiohttp.ClientSession(f"http://127.0.0.1:{served.port}") as http:
            for _ in range(5):
                async with http.get("/ready") as resp:
                    assert resp.status == 503
                await asyncio.sleep(0.3)
            async with http.get("/tokens", headers={"SVC-API-KEY": "vg_x"}) as resp:
                assert resp.status == 503
    lines = [r for r in caplog.records if "credentials" in r.getMessage()]
    # What the service's log handler writes: one line per cause per interval.
    coalescing = CoalescingFilter(served.settings.log_coalesce_interval)
    assert [r.getMessage() for r in lines if coalescing.filter(r)] == [lines[0].getMessage()]
    assert lines[0].getMessage() == ("neo4j refused the service's credentials: check "
                                     "VAULTGRAPH_NEO4J_USER and VAULTGRAPH_NEO4J_PASSWORD")
    assert [r for r in caplog.records if r.levelno >= logging.ERROR and r not in lines] == []


async def test_a_valid_but_wrong_key_encryption_key_refuses_to_start(settings, tmp_path):
    version = "w" + os.urandom(4).hex()
    right = f"{version}:{KeyRing.generate_spec().partition(':')[2]}"
    wrong = f"{version}:{KeyRing.generate_spec().partition(':')[2]}"
    async with open_services(dataclasses.replace(settings, kek=right)) as services:
        tenant_id = (await services.tenants.create("written under the right key")).tenant_id
    env = {**os.environ, "VAULTGRAPH_NEO4J_URI": settings.neo4j_uri,
           "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password(),
           "VAULTGRAPH_KEK": wrong, "VAULTGRAPH_PORT": "0", "VAULTGRAPH_HOME": str(tmp_path),
           "VAULTGRAPH_LOG_LEVEL": "WARNING"}
    # One process or several: the refusal is the one line printed, once, and the service
    # never says it serves first.
    for workers in ("1", "2"):
        done = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "vaultgraph", "serve", "--workers", workers],
            env=env, capture_output=True, text=True, timeout=120, check=False)
        assert (done.returncode, done.stderr) == (1, (
            f"vaultgraph: the key-encryption key {version} does not open the tenant keys stored "
            f"in Neo4j under it (tenant {tenant_id}; 1 of 1 sampled): configure the key ring the "
            "data was written with (VAULTGRAPH_KEK / VAULTGRAPH_KEK_FILE)\n")), workers


async def test_a_worker_start_up_failure_is_the_one_line_the_command_prints(settings, tmp_path):
    """`serve --workers 2` against a database that does not exist: the line the
    single-process command prints (docs/operations.md), no traceback and
    no driver text, and the supervisor exits 1."""
    env = {**os.environ, "VAULTGRAPH_NEO4J_URI": settings.neo4j_uri,
           "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password(),
           "VAULTGRAPH_KEK": settings.kek, "VAULTGRAPH_PORT": "0",
           "VAULTGRAPH_HOME": str(tmp_path), "VAULTGRAPH_NEO4J_DATABASE": "nosuchdb",
           "VAULTGRAPH_LOG_LEVEL": "WARNING"}
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "vaultgraph", "serve", "--workers", "2"],
        env=env, capture_output=True, text=True, timeout=120, check=False)
    line = (f"vaultgraph: Neo4j at {settings.neo4j_uri} has no database 'nosuchdb': set "
            "VAULTGRAPH_NEO4J_DATABASE to an existing database (Community has 'neo4j')")
    # Once, however many workers met it (the supervisor prints it), and nothing before it.
    assert (done.returncode, done.stderr) == (1, line + "\n")
