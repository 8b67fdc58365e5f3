"""The real server (`vaultgraph/server.py`: its connection handler, timeouts and drain) in this
process on a free port, over the real Neo4j."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from prometheus_client import REGISTRY


@pytest.fixture
def server_settings(settings):
    return dataclasses.replace(settings, host="127.0.0.1", port=0, shutdown_grace=5.0)


@pytest.fixture
async def serve(server_settings):
    """`await serve(**overrides)` → a started `Served`; drained at the end of the test."""
    from vaultgraph.server import start

    started = []

    async def make(**overrides):
        served = await start(dataclasses.replace(server_settings, **overrides))
        started.append(served)
        return served

    yield make
    for served in started:
        await served.drain()


async def raw_exchange(port: int, data: bytes, *, wait: float = 5.0) -> bytes:
    """Send bytes on a fresh connection; everything the server answers until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), wait)
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader, wait: float = 10.0) -> bytes:
    """One HTTP/1.1 response (head and Content-Length body) from the stream."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), wait)
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head + await asyncio.wait_for(reader.readexactly(length), wait)


async def wait_ready(served, within: float = 120.0) -> None:
    import aiohttp

    loop = asyncio.get_running_loop()
    until = loop.time() + within
    async with aiohttp.ClientSession() as http:
        while loop.time() < until:
            async with http.get(f"http://127.0.0.1:{served.port}/ready") as resp:
                if resp.status == 200:
                    return
            await asyncio.sleep(0.05)
    raise AssertionError("not ready in time")


class BoltProxy:
    """A TCP relay in front of the real Neo4j that the test can take down and bring back: to
    the service, an outage and a recovery of its database (the service must use `bolt://` to
    it, or routing would hand it Neo4j's own address)."""

    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.port}"

    def reserve(self) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._pipes):
            writer.transport.abort()

    def link(self) -> Link:
        """What one connection lets through each way (all of it, here)."""
        return Link()

    async def _relay(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._pipes |= {writer, up_writer}
        link = self.link()
        await asyncio.gather(self._pipe(reader, up_writer, link.to_neo4j),
                             self._pipe(up_reader, writer, link.to_service))

    async def _pipe(self, src, dst, passing) -> None:
        try:
            while (data := await src.read(65536)) and (data := passing(data)) is not None:
                if data:
                    dst.write(data)
                    await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.transport.abort()
            self._pipes.discard(dst)


class Link:
    """One relayed connection's filters: each takes the bytes read and returns those to pass on
    (b"" to hold them back), or None to cut the connection."""

    def to_neo4j(self, data: bytes) -> bytes | None:
        return data

    def to_service(self, data: bytes) -> bytes | None:
        return data


async def in_progress(at_least: int, within: float = 10.0) -> None:
    """Wait until this process is answering `at_least` requests (the metrics gauge the outermost
    middleware keeps): a request whose head arrived is in its handler."""
    loop = asyncio.get_running_loop()
    until = loop.time() + within
    while (REGISTRY.get_sample_value("vaultgraph_http_requests_in_progress") or 0) < at_least:
        if loop.time() > until:
            raise AssertionError(f"fewer than {at_least} requests in progress after {within}s")
        await asyncio.sleep(0.01)


def neo4j_address(settings) -> tuple[str, int]:
    from urllib.parse import urlsplit

    parts = urlsplit(settings.neo4j_uri)
    return parts.hostname or "127.0.0.1", parts.port or 7687
