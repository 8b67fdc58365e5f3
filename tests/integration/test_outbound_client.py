"""The outbound client against a real local server: what it sends, what it refuses, and that it
never follows a redirect or reads past its bounds."""

from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver

from vaultgraph.outbound import (
    AddressPolicy,
    AnswerTooLarge,
    DestinationRefused,
    DestinationTimeout,
    DestinationUnreachable,
    OutboundClient,
    RequestTooLarge,
    parse_networks,
)

LOOPBACK = AddressPolicy(allow_http=True, allowed_networks=parse_networks("127.0.0.1/32"))


class Recorder:
    def __init__(self):
        self.requests: list[dict] = []
        self.release = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append({"method": request.method, "path": request.path_qs,
                              "headers": dict(request.headers), "body": body})
        if request.path == "/redirect":
            raise web.HTTPFound("/elsewhere")
        if request.path == "/big":
            return web.Response(body=b"x" * 5000, content_type="application/octet-stream")
        if request.path == "/slow":
            await self.release.wait()
        if request.path == "/cookie":
            response = web.Response(text="ok")
            response.set_cookie("session", "abc")
            return response
        return web.json_response({"seen": len(body)}, status=201)


@pytest.fixture
async def destination(aiohttp_server):
    recorder = Recorder()
    server = await aiohttp_server(recorder.app(), host="127.0.0.1")
    recorder.base = f"http://127.0.0.1:{server.port}"
    yield recorder
    recorder.release.set()


@pytest.fixture
async def outbound():
    client = OutboundClient(LOOPBACK)
    yield client
    await client.close()


async def test_a_request_reaches_an_allowed_destination(destination, outbound):
    answer = await outbound.request("POST", destination.base + "/pay?x=1",
                                    headers={"Content-Type": "application/json", "X-A": "b"},
                                    body=b'{"a": 1}')
    assert (answer.status, answer.content_type, answer.body) == (
        201, "application/json; charset=utf-8", b'{"seen": 8}')
    [seen] = destination.requests
    assert (seen["method"], seen["path"], seen["body"]) == ("POST", "/pay?x=1", b'{"a": 1}')
    assert seen["headers"]["X-A"] == "b"
    assert seen["headers"]["Host"] == destination.base.removeprefix("http://")


async def test_a_loopback_destination_is_refused_without_the_setting(destination):
    for policy in (AddressPolicy(allow_http=True), AddressPolicy(
            allow_http=True, allowed_networks=parse_networks("10.0.0.0/8"))):
        async with OutboundClient(policy) as client:
            with pytest.raises(DestinationRefused):
                await client.request("GET", destination.base + "/x")
    assert destination.requests == []


async def test_http_is_refused_without_the_setting(destination):
    async with OutboundClient(AddressPolicy(allowed_networks=LOOPBACK.allowed_networks)) as c:
        with pytest.raises(DestinationRefused):
            await c.request("GET", destination.base + "/x")
    assert destination.requests == []


async def test_a_host_name_resolving_to_a_refused_address_is_refused_at_call_time(destination):
    port = destination.base.rsplit(":", 1)[1]
    async with OutboundClient(AddressPolicy(allow_http=True)) as client:
        with pytest.raises(DestinationRefused):
            await client.request("GET", f"http://localhost:{port}/x")
    assert destination.requests == []


class Answers(AbstractResolver):
    """A DNS whose answers the test sets: the name service, not what is under test."""

    def __init__(self, *addresses: str):
        self.addresses = addresses
        self.asked = 0

    async def resolve(self, host, port=0, family=socket.AF_INET):
        self.asked += 1
        return [{"hostname": host, "host": a, "port": port,
                 "family": socket.AF_INET6 if ":" in a else socket.AF_INET, "proto": 0,
                 "flags": socket.AI_NUMERICHOST} for a in self.addresses]

    async def close(self):
        pass


async def test_the_connection_goes_to_the_checked_address_and_keeps_the_host_name(destination):
    port = destination.base.rsplit(":", 1)[1]
    dns = Answers("127.0.0.1")
    async with OutboundClient(LOOPBACK, resolver=dns) as client:
        answer = await client.request("GET", f"http://hooks.example:{port}/named")
        assert answer.status == 201
    # The DNS now points the name elsewhere (rebinding): a new lookup is checked again.
    dns.addresses = ("169.254.169.254",)
    async with OutboundClient(LOOPBACK, resolver=dns) as client:
        with pytest.raises(DestinationRefused):
            await client.request("GET", f"http://hooks.example:{port}/moved")
    assert dns.asked == 2
    assert [r["path"] for r in destination.requests] == ["/named"]
    assert destination.requests[0]["headers"]["Host"] == f"hooks.example:{port}"


async def test_every_resolved_address_must_be_allowed(destination):
    port = destination.base.rsplit(":", 1)[1]
    async with OutboundClient(LOOPBACK, resolver=Answers("127.0.0.1", "10.0.0.1")) as client:
        with pytest.raises(DestinationRefused):
            await client.request("GET", f"http://hooks.example:{port}/x")
    assert destination.requests == []


async def test_a_redirect_is_answered_never_followed(destination, outbound):
    answer = await outbound.request("GET", destination.base + "/redirect")
    assert answer.status == 302
    assert answer.headers["Location"] == "/elsewhere"
    assert [r["path"] for r in destination.requests] == ["/redirect"]


async def test_answers_are_bounded(destination, outbound):
    with pytest.raises(AnswerTooLarge):
        await outbound.request("GET", destination.base + "/big", max_answer_bytes=4999)
    kept = await outbound.request("GET", destination.base + "/big", max_answer_bytes=1024,
                                  truncate=True)
    assert (kept.body, kept.truncated) == (b"x" * 1024, True)
    whole = await outbound.request("GET", destination.base + "/big", max_answer_bytes=5000)
    assert (len(whole.body), whole.truncated) == (5000, False)


async def test_a_request_body_over_the_bound_is_not_sent(destination, outbound):
    with pytest.raises(RequestTooLarge):
        await outbound.request("POST", destination.base + "/x", body=b"y" * 11,
                               max_request_bytes=10)
    assert destination.requests == []


async def test_a_destination_that_does_not_answer_in_time(destination, outbound):
    with pytest.raises(DestinationTimeout):
        await outbound.request("GET", destination.base + "/slow", time_limit=0.2)


async def test_an_unreachable_destination(outbound):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(DestinationUnreachable) as caught:
            await outbound.request("GET", f"http://127.0.0.1:{port}/x")
    assert caught.value.reason == "unreachable"
    assert str(port) not in str(caught.value)


async def test_no_cookie_or_environment_proxy_is_used(destination, outbound, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    await outbound.request("GET", destination.base + "/cookie")
    await outbound.request("GET", destination.base + "/after")
    assert [r["path"] for r in destination.requests] == ["/cookie", "/after"]
    assert "Cookie" not in destination.requests[1]["headers"]
