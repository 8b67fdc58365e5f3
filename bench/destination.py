"""The proxy workload's destination: a stand-in processor answering every request at once with a
small JSON body, in a process of its own on 127.0.0.1 (bench/local_server.py), as a real
processor is elsewhere: its CPU is neither side's. The bare client posts to it directly, the
service through a proxy; had it served from a thread of the benchmark's process, the bare
client's figure would hold the destination's work and the service's would not.

    python -m bench.destination   # prints its port on the first line, serves until stopped
"""

from __future__ import annotations

import asyncio
import uuid

from aiohttp import web

from vaultgraph.repository.database import Database
from vaultgraph.repository.proxies import ProxyRepository

from .local_server import ServerProcess, serve

ANSWER = b'{"status": "captured"}'


async def _answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=ANSWER, content_type="application/json")


def app() -> web.Application:
    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", _answer)
    return application


class Destination(ServerProcess):
    """`python -m bench.destination` as a child of the benchmark's process; `url` ends in a
    path of its own (`/v1`), as a processor's API does."""

    module = "bench.destination"
    path = "/v1"


async def create_bench_proxy(db: Database, tenant_id: str, destination_url: str) -> str:
    """The proxy workload's proxy of `tenant_id`, to `destination_url` (a running
    `Destination`'s): its id. The service under measurement reaches the destination only with
    127.0.0.1 exempt from its outbound address policy (bench/environment.py `Service`)."""
    proxy_id = str(uuid.uuid4())
    await ProxyRepository(db).create(
        tenant_id, proxy_id, name="bench processor", destination_url=destination_url,
        description=None, header_allowlist=[], created_by=None)
    return proxy_id


if __name__ == "__main__":
    asyncio.run(serve(app()))
