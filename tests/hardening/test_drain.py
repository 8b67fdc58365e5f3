"""Issue #18.6 and operations #14.5: SIGTERM drains. In-flight requests finish (answered with
`Connection: close`), idle keep-alive connections close, new connections go to the processes
still listening, the process exits 0; `--workers N` shares one port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp
from factories import children_of

from .conftest import read_response, wait_ready


async def test_an_in_flight_request_finishes_with_connection_close(serve, tenant, settings):
    served = await serve()
    await wait_ready(served)
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    body = b'{"type": "token", "data": "drained"}'
    writer.write(b"POST /tokens HTTP/1.1\r\nHost: x\r\nSVC-API-KEY: " + tenant.key.encode() +
                 b"\r\nContent-Type: application/json\r\nContent-Length: " +
                 str(len(body)).encode() + b"\r\n\r\n" + body[:10])
    await writer.drain()
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", served.port)
    idle_writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # then stays idle
    await read_response(idle_reader)
    await asyncio.sleep(0.2)
    draining = asyncio.create_task(served.drain())
    await asyncio.sleep(0.3)
    assert served.app[services_key()].readiness.draining
    with contextlib.suppress(OSError):  # no new connections: the socket is closed
        _r, w = await asyncio.open_connection("127.0.0.1", served.port)
        w.close()
        raise AssertionError("still accepting")
    writer.write(body[10:])  # the in-flight request completes
    await writer.drain()
    raw = await read_response(reader)
    head = raw.split(b"\r\n\r\n")[0].decode()
    assert head.startswith("HTTP/1.1 201")
    assert "Connection: close" in head
    assert await asyncio.wait_for(idle_reader.read(), 5) == b""  # the idle one was closed
    await asyncio.wait_for(draining, served.settings.shutdown_grace + 5)
    writer.close()
    idle_writer.close()


async def test_the_listener_closes_before_any_answer_says_connection_close(serve):
    """A client answered `Connection: close` connects again at once; under `--workers` a
    connection queued on a listener that then closes is reset (refused), so the drain closes
    its listener before it turns to draining (which makes answers say so)."""
    served = await serve()
    await wait_ready(served)
    readiness = served.app[services_key()].readiness
    seen = []
    drain = readiness.drain

    def recording_drain():
        seen.append(served.site._server.is_serving())
        drain()

    readiness.drain = recording_drain
    await served.drain()
    assert seen == [False] and readiness.draining


def services_key():
    from vaultgraph.api.typedefs import services_key as key

    return key


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]



async def load(url: str, headers: dict, stop: asyncio.Event, counts: dict) -> None:
    """One keep-alive client: requests back to back until `stop`."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as http:
        while not stop.is_set():
            try:
                async with http.get(url, headers=headers) as resp:
                    await resp.read()
                    counts["ok" if resp.status == 200 else "failed"] += 1
            except aiohttp.ClientConnectorError:
                counts["refused"] += 1  # never sent: nothing listens (a balancer goes elsewhere)
                await asyncio.sleep(0.01)
            except (aiohttp.ClientError, OSError):
                counts["failed"] += 1  # sent, and lost


async def test_sigterm_under_load_fails_no_request(tenant, settings, tmp_path):
    port = free_port()
    env = {**os.environ, "VAULTGRAPH_NEO4J_URI": settings.neo4j_uri,
           "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password(),
           "VAULTGRAPH_KEK": settings.kek, "VAULTGRAPH_HOST": "127.0.0.1",
           "VAULTGRAPH_PORT": str(port), "VAULTGRAPH_HOME": str(tmp_path),
           "VAULTGRAPH_SHUTDOWN_GRACE": "10", "VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "0",
           "VAULTGRAPH_LOG_LEVEL": "INFO",
           # The load here is far over one application's rate limit; drain is what is measured.
           "VAULTGRAPH_RATE_LIMIT": "0"}
    log = (tmp_path / "serve.log").open("wb")
    master = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vaultgraph", "serve", "--workers", "2", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(300):
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(base + "/ready") as resp:
                        if resp.status == 200:
                            break
                await asyncio.sleep(0.1)
            async with http.post(base + "/tokens", json={"type": "token", "data": "x"},
                                 headers={"SVC-API-KEY": tenant.key}) as resp:
                assert resp.status == 201
                token = (await resp.json())["id"]
        workers = children_of(master.pid)
        assert len(workers) == 2
        counts = {"ok": 0, "failed": 0, "refused": 0}
        stop = asyncio.Event()
        clients = [asyncio.create_task(load(f"{base}/tokens/{token}",
                                            {"SVC-API-KEY": tenant.key}, stop, counts))
                   for _ in range(16)]
        await until(lambda: counts["ok"] >= 16)  # the load is under way
        before = counts["ok"]
        os.kill(workers[0], signal.SIGTERM)  # one worker drains; the other keeps the port

        def drained() -> bool:
            return workers[0] not in children_of(master.pid) or "State:\tZ" in Path(
                f"/proc/{workers[0]}/status").read_text()

        await until(drained)
        await until(lambda: counts["ok"] >= before + 16)  # the load went on through the drain
        one_worker = dict(counts)
        master.send_signal(signal.SIGTERM)  # now all of it, still under load
        started = time.monotonic()
        code = await asyncio.wait_for(master.wait(), 30)
        took = time.monotonic() - started
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(*clients)
        print(f"\nSIGTERM to one of 2 workers under 16 keep-alive clients: {one_worker}; "
              f"then to the master: {counts}, exit {code} after {took:.2f} s")
        assert code == 0
        assert one_worker["failed"] == 0 and one_worker["refused"] == 0
        assert counts["failed"] == 0
    finally:
        if master.returncode is None:
            master.kill()
            await master.wait()
        log.close()
    text = (tmp_path / "serve.log").read_text()
    assert text.count('"msg":"stopped"') == 2, text[-3000:]
    assert '"level":"error"' not in text, text[-3000:]


async def until(condition, within: float = 30.0) -> None:
    """Wait for `condition()` to hold, polling the real state (bounded, never a fixed sleep)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)
