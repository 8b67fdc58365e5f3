"""A local destination that records what reaches it, and small calls to the proxy routes."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from factories import database, key_headers, make_application
from yarl import URL


class Destination:
    """A "processor" on 127.0.0.1: it records each request (method, raw path and query,
    headers, body) and answers 201 with the body it received, under the Content-Type it got."""

    def __init__(self):
        self.requests: list[dict[str, Any]] = []
        self.base = ""

    def app(self) -> web.Application:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append({"method": request.method, "path": request.rel_url.raw_path_qs,
                              "headers": request.headers.copy(), "body": body})
        if request.path.endswith("/huge"):
            return web.Response(body=b"x" * (1_048_576 + 1))
        if request.path.endswith("/teapot"):
            return web.Response(status=418, text="short and stout",
                                headers={"Set-Cookie": "a=b", "X-Secret-Header": "s"})
        if request.path.endswith("/slow-echo"):
            await asyncio.sleep(0)  # yields, so concurrent calls interleave
        return web.Response(status=201, body=body,
                            content_type=request.content_type or "application/octet-stream")


async def start_destination(aiohttp_server) -> Destination:
    destination = Destination()
    server = await aiohttp_server(destination.app(), host="127.0.0.1")
    destination.base = f"http://127.0.0.1:{server.port}"
    return destination


async def create_proxy(client, headers, url: str, **fields) -> dict:
    resp = await client.post("/proxies", json={"name": "processor", "destination_url": url,
                                               **fields}, headers=headers)
    body = await resp.json()
    assert resp.status == 201, body
    return body


async def create_token(client, headers, data, *, type: str = "token", containers=None,
                       **fields) -> str:
    body: dict = {"type": type, "data": data, **fields}
    if containers is not None:
        body["containers"] = containers
    resp = await client.post("/tokens", json=body, headers=headers)
    created = await resp.json()
    assert resp.status == 201, created
    return created["id"]


async def app_headers(client, admin_headers, *rules: dict, permissions) -> dict[str, str]:
    created = await make_application(client, admin_headers, permissions=permissions,
                                     rules=list(rules) if rules else None, name="caller")
    return key_headers(created)


def json_of(request: dict) -> Any:
    return orjson.loads(request["body"])


async def cypher(client, query: str, **params: Any) -> list[dict]:
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(query, params, database_=db.database)
    return [record.data() for record in records]


async def get_tail_as_sent(client, headers, proxy_id: str, tail: str) -> tuple[int, Any]:
    """GET `/proxy/<id>/<tail>` with the tail exactly as written (no client normalises its dots
    or escapes): the status, and the problem's `errors` (None unless the vault refused it)."""
    url = URL(str(client.make_url("/")).rstrip("/") + f"/proxy/{proxy_id}/{tail}", encoded=True)
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as resp:
        body = await resp.read()
        if resp.content_type == "application/problem+json":
            return resp.status, orjson.loads(body).get("errors")
        return resp.status, None
