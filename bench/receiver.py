"""The webhook_create workload's endpoint: a receiver in a process of its own on 127.0.0.1, as
a real endpoint is elsewhere (its CPU is neither side's; `make bench` reports it apart).

Each webhook posts to `/hook/<name>`; `PUT /secret/<name>` tells the receiver that webhook's
secret, and every delivery's `webhook-signature` is checked against it (Standard Webhooks:
`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, checked here
with code of its own rather than the vault's), as is its `webhook-id` against the body's `id`.
A delivery is answered 204 at once. `GET /stats/<name>?since=N` gives the deliveries received
so far, and of those from the N-th on (a count of deliveries, as `received` gives it) how many
failed the checks and their lag (arrival less the event's `timestamp`, the change's commit).

    python -m bench.receiver      # prints its port on the first line, serves until stopped
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from dataclasses import dataclass, field
from datetime import datetime

import orjson
from aiohttp import web

from .local_server import ServerProcess, serve
from .stats import percentile


@dataclass
class Hook:
    secret: bytes = b""
    received: int = 0
    # Per delivery, in arrival order: whether it passed the checks, and its lag (None when
    # its body carried no readable timestamp).
    good: list[bool] = field(default_factory=list)
    lags: list[float | None] = field(default_factory=list)


def signed(secret: bytes, msg_id: str, timestamp: str, body: bytes, header: str) -> bool:
    """Whether one of the header's `v1,` signatures is the body's under `secret`."""
    digest = hmac.new(secret, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    want = "v1," + base64.b64encode(digest).decode()
    return any(hmac.compare_digest(want, part) for part in header.split(" "))


def _epoch(text: str) -> float:
    """A Neo4j datetime's text (nanoseconds, `Z`) as Unix seconds."""
    head, _, rest = text.replace("Z", "+00:00").partition(".")
    if not rest:
        return datetime.fromisoformat(head).timestamp()
    digits = "".join(ch for ch in rest if ch.isdigit())
    return datetime.fromisoformat(f"{head}.{digits[:6]}{rest[len(digits):]}").timestamp()


class Receiver:
    def __init__(self) -> None:
        self.hooks: dict[str, Hook] = {}

    def hook(self, name: str) -> Hook:
        return self.hooks.setdefault(name, Hook())

    async def deliver(self, request: web.Request) -> web.Response:
        hook = self.hook(request.match_info["name"])
        body = await request.read()
        now = time.time()
        hook.received += 1
        ok, lag = False, None
        try:
            event = orjson.loads(body)
            lag = now - _epoch(event["timestamp"])
            headers = request.headers
            ok = (headers["webhook-id"] == event["id"] and hook.secret != b"" and signed(
                hook.secret, headers["webhook-id"], headers["webhook-timestamp"], body,
                headers["webhook-signature"]))
        except (KeyError, ValueError, TypeError, AttributeError):
            ok = False
        hook.good.append(ok)
        hook.lags.append(lag)
        return web.Response(status=204)

    async def secret(self, request: web.Request) -> web.Response:
        text = (await request.text()).strip()
        self.hook(request.match_info["name"]).secret = base64.b64decode(
            text.removeprefix("whsec_"))
        return web.Response(status=204)

    async def stats(self, request: web.Request) -> web.Response:
        hook = self.hook(request.match_info["name"])
        since = int(request.query.get("since", "0"))
        lags = sorted(lag for lag in hook.lags[since:] if lag is not None)
        return web.json_response({
            "received": hook.received, "bad": hook.good[since:].count(False),
            "lag_p50_ms": round(percentile(lags, 50) * 1000, 1) if lags else None,
            "lag_p99_ms": round(percentile(lags, 99) * 1000, 1) if lags else None})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/hook/{name}", self.deliver)
        app.router.add_put("/secret/{name}", self.secret)
        app.router.add_get("/stats/{name}", self.stats)
        return app


class ReceiverProcess(ServerProcess):
    """`python -m bench.receiver` as a child of the benchmark's process."""

    module = "bench.receiver"


if __name__ == "__main__":
    asyncio.run(serve(Receiver().app()))
