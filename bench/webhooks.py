"""What a subscribed webhook costs a create, and how long its event takes to arrive.

Creates run through the real app (in this process, on a free port) against the Neo4j the
environment names, 32 at a time, in rounds that alternate between a tenant without webhooks
and a tenant with one webhook subscribed to every event, so the two modes share the machine's
state (whole runs minutes apart differ far more than the cost measured). The webhook's
receiver is a local aiohttp server in a process of its own (http and 127.0.0.0/8 allowed for
the run); the delivery lag of an event is its arrival at the receiver minus its `timestamp`
(the change's commit).

Reported: creates per second and median/p99 latency per mode, the webhook mode's throughput
cost against none (the target: at most 10 % slower), the delivery lag p50/p99/max, and the
events delivered per second while the webhook tenant's creates ran (their create rate when the
sender keeps up); written to
`bench/results/webhooks-latest.json` and a dated copy.

    .venv/bin/python -m bench.webhooks                                   # 6 rounds of 2,000
    BENCH_WEBHOOKS_ROUNDS=2 BENCH_WEBHOOKS_REQUESTS=50 .venv/bin/python -m bench.webhooks
    BENCH_WEBHOOKS_SENDER=off .venv/bin/python -m bench.webhooks    # the outbox write alone

With the sender inline (the default) the webhook rounds also carry the deliveries' work, in
this one process beside the creates and their client: the create figure is then the outbox
and the delivery together on the same cores.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import statistics
import time
from datetime import datetime

import aiohttp
from aiohttp import web

from vaultgraph.app import create_app
from vaultgraph.settings import Settings

from .environment import new_kek, say
from .run import provenance, write_results
from .stats import percentile

CONCURRENCY = 32
CARD = {"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030,
        "cvc": "123"}


class Receiver:
    """The endpoint: records each event's lag and arrival time (wall clock, shared by the
    processes), and tells them at GET /stats."""

    def __init__(self):
        self.lags: list[float] = []
        self.arrivals: list[float] = []

    async def handle(self, request: web.Request) -> web.Response:
        event = await request.json()
        at = datetime.fromisoformat(_micro(event["timestamp"])).timestamp()
        now = time.time()
        self.lags.append(now - at)
        self.arrivals.append(now)
        return web.Response(status=204)

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response({"lags": self.lags, "arrivals": self.arrivals})


def _receive(conn) -> None:
    """The receiver's own process, as a real endpoint is elsewhere: in the service's process
    it would share the event loop that sends to it (its answer time would be the service's
    own load). Sends its port on `conn`, then serves until terminated."""
    async def serve() -> None:
        receiver = Receiver()
        app = web.Application()
        app.router.add_post("/hook", receiver.handle)
        app.router.add_get("/stats", receiver.stats)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        conn.send(site._server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(serve())


async def _all_received(http: aiohttp.ClientSession, port: int, expected: int, *,
                        within: float) -> dict:
    """The receiver's record once `expected` events arrived, or after `within` seconds."""
    until = time.monotonic() + within
    for _ in range(int(within / 0.2) + 1):
        async with http.get(f"http://127.0.0.1:{port}/stats") as resp:
            received = await resp.json()
        if len(received["lags"]) >= expected or time.monotonic() > until:
            break
        await asyncio.sleep(0.2)
    return received


def _micro(text: str) -> str:
    """Neo4j's nanosecond text cut to what fromisoformat reads."""
    text = text.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if not dot:
        return text
    digits = "".join(ch for ch in rest if ch.isdigit())
    return f"{head}.{digits[:6]}{rest[len(digits):]}"


async def _round(http: aiohttp.ClientSession, url: str, key: str, n: int) -> dict:
    latencies: list[float] = []
    todo = iter(range(n))

    async def one_connection() -> None:
        for _ in todo:
            started = time.perf_counter()
            async with http.post(f"{url}/tokens", json={"type": "card", "data": CARD},
                                 headers={"SVC-API-KEY": key}) as resp:
                await resp.read()
                assert resp.status == 201, resp.status
            latencies.append(time.perf_counter() - started)

    began = time.monotonic()
    await asyncio.gather(*(one_connection() for _ in range(CONCURRENCY)))
    seconds = time.monotonic() - began
    latencies.sort()
    return {"rps": n / seconds, "p50_ms": percentile(latencies, 50) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000}


async def main() -> dict:
    rounds = int(os.environ.get("BENCH_WEBHOOKS_ROUNDS", "6"))
    requests = int(os.environ.get("BENCH_WEBHOOKS_REQUESTS", "2000"))
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    receiving = spawn.Process(target=_receive, args=(theirs,), daemon=True)
    receiving.start()
    rec_port = await asyncio.to_thread(ours.recv)

    # "off": no sender in this process, so the rounds measure what the outbox write alone
    # costs a create (the delivery's own work, here in the same process and event loop as the
    # creates and their client, is left out); no lag is measured then.
    sending = os.environ.get("BENCH_WEBHOOKS_SENDER", "inline") != "off"
    base = Settings.from_env()
    settings = dataclasses.replace(
        base, kek=base.kek or new_kek(), log_level="WARNING", webhook_allow_http=True,
        webhook_allowed_networks="127.0.0.0/8",
        webhook_poll_interval=0.05 if sending else 0.0, expiry_sweep_interval=0.0,
        rate_limit=0.0)  # the applications' buckets are not what is measured
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    from vaultgraph.api.typedefs import services_key

    tenants = app[services_key].tenants
    plain, hooked = await tenants.create("bench-plain"), await tenants.create("bench-webhook")
    results: dict[str, list[dict]] = {"none": [], "one_webhook": []}
    windows: list[tuple[float, float]] = []  # the webhook tenant's rounds (wall clock)
    try:
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as http:
            async with http.post(f"{url}/webhooks", headers={"SVC-API-KEY": hooked.key}, json={
                    "url": f"http://127.0.0.1:{rec_port}/hook", "events": ["*"]}) as resp:
                assert resp.status == 201, await resp.text()
            await _round(http, url, plain.key, min(200, requests))  # warm-up
            for i in range(rounds):
                order = [("none", plain), ("one_webhook", hooked)]
                for mode, tenant in (order if i % 2 == 0 else order[::-1]):
                    began = time.time()
                    results[mode].append(await _round(http, url, tenant.key, requests))
                    if mode == "one_webhook":
                        windows.append((began, time.time()))
                    say(f"round {i + 1}/{rounds} {mode}: {results[mode][-1]['rps']:.0f}/s")
            received = (await _all_received(http, rec_port, rounds * requests, within=120)
                        if sending else {"lags": [], "arrivals": []})
    finally:
        await runner.cleanup()
        receiving.terminate()

    def summary(mode: str) -> dict:
        rows = results[mode]
        return {k: statistics.median(r[k] for r in rows) for k in ("rps", "p50_ms", "p99_ms")}

    none, one = summary("none"), summary("one_webhook")
    lags = sorted(received["lags"])
    # Deliveries that arrived while the webhook tenant's creates ran, per second of those
    # rounds: the create rate when the sender keeps up.
    during = sum(1 for t in received["arrivals"] for start, end in windows if start <= t <= end)
    busy = sum(end - start for start, end in windows)
    return {
        **provenance(), "rounds": rounds,
        "sender": "inline" if sending else "off",
        "requests_per_round": requests, "concurrency": CONCURRENCY,
        "create": {"none": none, "one_webhook": one,
                   "slower_pct": round((none["rps"] / one["rps"] - 1) * 100, 1)},
        "delivery_lag_s": {"delivered": len(lags), "expected": rounds * requests,
                           "p50": percentile(lags, 50) if lags else None,
                           "p99": percentile(lags, 99) if lags else None,
                           "max": lags[-1] if lags else None,
                           "delivered_per_s": during / busy if busy else None},
    }


if __name__ == "__main__":
    result = asyncio.run(main())
    path = write_results(result, "webhooks-" if result["sender"] == "inline"
                         else "webhooks-outbox-")
    lag = result["delivery_lag_s"]
    say(f"create with one webhook: {result['create']['slower_pct']} % slower; delivery lag "
        f"p50 {lag['p50']} p99 {lag['p99']} max {lag['max']} s, {lag['delivered_per_s']} "
        f"events/s delivered; written to {path}")
