"""The client's proxy methods against the real service (a `vaultgraph serve` that may reach a
destination on 127.0.0.1 over http): management, and calls whose answer is the destination's
whatever its status, the vault's own refusals raised."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import pytest
from aiohttp import web
from factories import service_env

from vaultgraph.client import AsyncClient, Client, RetryPolicy
from vaultgraph.client.client import DEFAULT_TIMEOUT, PROXY_CALL_LIMIT, PROXY_TIMEOUT
from vaultgraph.client.errors import BadRequest, NotFound, RateLimited, ServerError
from vaultgraph.services.proxy import CALL_TIME_LIMIT
from vaultgraph.testing.service import ServiceProcess

NUMBER = "4242424242424242"
SLOW = DEFAULT_TIMEOUT + 1   # a destination slower than the client's timeout of other calls


class _Processor(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.seen.append({"method": self.command, "path": self.path, "body": body,
                          "idempotency_key": self.headers.get("Idempotency-Key"),
                          "headers": {k.lower(): v for k, v in self.headers.items()}})
        status = 402 if self.path.endswith("/declined") else (
            429 if self.path.endswith("/busy") else 200)
        if self.path.endswith("/slow"):
            time.sleep(SLOW)
        out = json.dumps({"received": len(body)}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def processor():
    _Processor.seen = []
    server = HTTPServer(("127.0.0.1", 0), _Processor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", _Processor.seen
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def service(settings):
    env = {**service_env(settings), "VAULTGRAPH_WEBHOOK_ALLOW_HTTP": "true",
           "VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32"}
    with ServiceProcess(env) as running:
        yield running


@pytest.fixture(scope="module")
def admin_key(service):
    return service.create_tenant("client-proxy").key


def test_management_and_calls(service, admin_key, processor):
    base, seen = processor
    with Client(service.url, api_key=admin_key) as vg:
        card = vg.create_token("card_number", NUMBER)
        proxy = vg.create_proxy("processor", base + "/v1", description="test")
        assert vg.get_proxy(proxy["id"]) == proxy
        assert [p["id"] for p in vg.list_proxies(size=100)["data"]] == [proxy["id"]]
        assert vg.update_proxy(proxy["id"], {"name": "renamed"})["name"] == "renamed"

        answer = vg.proxy(proxy["id"], "POST", "charges", json={"pan": f"{{{{ {card['id']} }}}}"})
        assert (answer.status, answer.json()) == (200, {"received": len(json.dumps(
            {"pan": NUMBER}, separators=(",", ":")))})
        assert json.loads(seen[-1]["body"]) == {"pan": NUMBER}
        assert seen[-1]["path"] == "/v1/charges"
        assert seen[-1]["idempotency_key"] is None   # the client adds none of its own

        declined = vg.proxy(proxy["id"], "POST", "/declined", content=b"x",
                            headers={"Content-Type": "text/plain", "Idempotency-Key": "k1"})
        assert declined.status == 402 and declined.content_type == "application/json"
        assert seen[-1]["idempotency_key"] == "k1"

        with pytest.raises(BadRequest):
            vg.proxy(proxy["id"], "POST", "charges", json={"pan": "{{ no-such-token }}"})
        count = len(seen)
        vg.delete_proxy(proxy["id"])
        with pytest.raises(NotFound):
            vg.proxy(proxy["id"], "GET", "x")
        assert len(seen) == count

        dead = vg.create_proxy("dead", "http://127.0.0.1:9/")
        with pytest.raises(ServerError) as caught:
            vg.proxy(dead["id"], "GET", "x")
        assert caught.value.status == 502


async def test_the_async_client_calls_too(service, admin_key, processor):
    base, seen = processor
    async with AsyncClient(service.url, api_key=admin_key) as vg:
        card = await vg.create_token("card_number", NUMBER)
        proxy = await vg.create_proxy("processor", base)
        answer = await vg.proxy(proxy["id"], "PUT", "a/b", params={"q": "1"},
                                json=[f"{{{{ {card['id']} | last4 }}}}"])
        assert answer.status == 200
        assert (seen[-1]["method"], seen[-1]["path"], json.loads(seen[-1]["body"])) == (
            "PUT", "/a/b?q=1", ["4242"])
        assert (await vg.get_proxy(proxy["id"]))["destination_url"] == base
        await vg.delete_proxy(proxy["id"])


# -- what is retried: only the vault's own refusal, never the destination's answer ------------

def test_a_destination_that_answers_429_gets_the_call_once(service, admin_key, processor):
    """The destination's 429 is its answer (`SVC-PROXY-STATUS: forwarded`): the card was sent
    with the call, so a retry would charge it again."""
    base, seen = processor
    slept: list[float] = []
    with Client(service.url, api_key=admin_key, sleep=slept.append) as vg:
        card = vg.create_token("card_number", NUMBER)
        proxy = vg.create_proxy("payments", base)
        count = len(seen)
        answer = vg.proxy(proxy["id"], "POST", "charges/busy",
                          json={"pan": f"{{{{ {card['id']} }}}}", "amount": 100})
    assert answer.status == 429 and answer.json() == {"received": len(seen[-1]["body"])}
    assert [s["path"] for s in seen[count:]] == ["/charges/busy"]
    assert slept == []


async def test_the_async_client_sends_a_call_the_destination_refused_once(
        service, admin_key, processor):
    base, seen = processor
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async with AsyncClient(service.url, api_key=admin_key, sleep=sleep) as vg:
        proxy = await vg.create_proxy("payments", base)
        count = len(seen)
        answer = await vg.proxy(proxy["id"], "POST", "busy", json={"amount": 100})
    assert answer.status == 429
    assert [s["path"] for s in seen[count:]] == ["/busy"]
    assert slept == []


async def test_the_vaults_own_429_is_retried(aiohttp_server):
    """A 429 without `SVC-PROXY-STATUS` is the vault's refusal (its rate limit, or no place
    among the tenant's calls in flight): nothing was sent, and the call is tried again."""
    answers: list[str | None] = ["2", None]   # a refusal's Retry-After, or None: forwarded
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.path)
        retry_after = answers.pop(0)
        if retry_after is None:
            return web.json_response({"ok": True}, headers={"SVC-PROXY-STATUS": "forwarded"})
        return web.json_response({"title": "Too Many Requests", "status": 429}, status=429,
                                 headers={"Retry-After": retry_after},
                                 content_type="application/problem+json")

    app = web.Application()
    app.router.add_post("/proxy/{id}/{tail:.*}", handler)
    server = await aiohttp_server(app)
    slept: list[float] = []
    with Client(str(server.make_url("")), "k", sleep=slept.append) as vg:
        answer = await asyncio.to_thread(vg.proxy, "p1", "POST", "charges", json={})
    assert (answer.status, answer.json(), slept) == (200, {"ok": True}, [2.0])
    assert seen == ["/proxy/p1/charges"] * 2

    answers[:] = ["1", "1"]

    async def nap(seconds: float) -> None:
        slept.append(seconds)

    async with AsyncClient(str(server.make_url("")), "k", sleep=nap,
                           retry=RetryPolicy(attempts=2)) as avg:
        with pytest.raises(RateLimited):
            await avg.proxy("p1", "POST", "charges", json={})
    assert slept == [2.0, 1.0] and answers == []


def test_a_call_carries_the_callers_headers_not_the_clients_defaults(
        service, admin_key, processor):
    """The client's own Accept (application/json) and User-Agent are not the caller's: the
    destination sees what the vault sends without them, or what the caller gave."""
    base, seen = processor
    with Client(service.url, api_key=admin_key) as vg:
        proxy = vg.create_proxy("headers", base)
        vg.proxy(proxy["id"], "GET", "plain")
        plain = seen[-1]["headers"]
        vg.proxy(proxy["id"], "POST", "given", content=b"<a/>",
                 headers={"accept": "application/xml", "Content-Type": "application/xml",
                          "User-Agent": "shop/1.0", "X-Request-Id": "r-1"})
        given = seen[-1]["headers"]
    assert plain.get("accept") != "application/json"
    assert "python-httpx" not in plain.get("user-agent", "")
    assert (given["accept"], given["content-type"], given["user-agent"],
            given["x-request-id"]) == ("application/xml", "application/xml", "shop/1.0", "r-1")
    assert not any(name.startswith("svc-") for name in {**plain, **given})


# -- how long a call is waited for ------------------------------------------------------------

class _Timeouts(httpx.HTTPTransport):
    """The real transport, noting each request's read timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[float | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.read.append(request.extensions["timeout"]["read"])
        return super().handle_request(request)


def test_a_call_is_waited_for_as_long_as_the_vault_waits_for_it(service, admin_key, processor):
    """The vault gives a destination 30 s; a client giving up sooner could not tell whether the
    destination got the call. By default a call through a proxy is waited for that long and a
    margin, and the destination's answer after the client's usual 10 s still arrives; a timeout
    the caller gives (to the call, or to the client) is kept."""
    assert PROXY_CALL_LIMIT == CALL_TIME_LIMIT and PROXY_TIMEOUT > CALL_TIME_LIMIT
    base, seen = processor
    transport = _Timeouts()
    with Client(service.url, api_key=admin_key, transport=transport) as vg:
        proxy = vg.create_proxy("slow", base)
        assert vg.proxy(proxy["id"], "POST", "slow", json={"amount": 100}).status == 200
        vg.proxy(proxy["id"], "GET", "x", timeout=3)
    assert seen[-2]["path"] == "/slow"
    assert transport.read == [DEFAULT_TIMEOUT, PROXY_TIMEOUT, 3]
    transport.read.clear()
    with Client(service.url, api_key=admin_key, timeout=4, transport=transport) as vg:
        vg.proxy(proxy["id"], "GET", "x")
    assert transport.read == [4]


async def test_the_async_client_waits_as_long():
    read: list[float | None] = []

    def handle(request: httpx.Request) -> httpx.Response:
        read.append(request.extensions["timeout"]["read"])
        return httpx.Response(200, headers={"SVC-PROXY-STATUS": "forwarded"})

    async with AsyncClient("http://vault.test", "k", transport=httpx.MockTransport(handle)) as vg:
        await vg.proxy("p1", "GET")
        await vg.proxy("p1", "GET", timeout=None)   # no timeout: the caller's choice
    assert read == [PROXY_TIMEOUT, None]
