"""The client's proxy methods against the real service (a `vaultgraph serve` that may reach a
destination on 127.0.0.1 over http): management, and calls whose answer is the destination's
whatever its status, the vault's own refusals raised."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from factories import service_env

from vaultgraph.client import AsyncClient, BadRequest, Client, NotFound, ServerError
from vaultgraph.testing.service import ServiceProcess

NUMBER = "4242424242424242"


class _Processor(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.seen.append({"method": self.command, "path": self.path, "body": body,
                          "idempotency_key": self.headers.get("Idempotency-Key")})
        status = 402 if self.path.endswith("/declined") else 200
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
