"""At least once across a crash: a `vaultgraph serve` killed with SIGKILL while it sends an
event (claimed, the receiver holding the request) leaves nothing lost: after a restart the
claim's lease lapses and the same event (the same `webhook-id`) is delivered."""

from __future__ import annotations

import asyncio
import os
import signal

import aiohttp
from factories import service_env
from standardwebhooks.webhooks import Webhook

from vaultgraph.testing.service import ServiceProcess

from .conftest import CARD, Receiver, until


async def test_an_event_in_flight_when_the_service_is_killed_arrives_after_restart(
        settings, aiohttp_server):
    receiver = Receiver()
    receiver.hold = asyncio.Event()
    server = await aiohttp_server(receiver.app(), host="127.0.0.1")
    env = {**service_env(settings), "VAULTGRAPH_WEBHOOK_ALLOW_HTTP": "true",
           "VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
           "VAULTGRAPH_WEBHOOK_POLL_INTERVAL": "0.1", "VAULTGRAPH_WEBHOOK_TIMEOUT": "5",
           "VAULTGRAPH_WEBHOOK_LEASE": "6"}
    first = ServiceProcess(env)
    await asyncio.to_thread(first.start)
    try:
        tenant = await asyncio.to_thread(first.create_tenant)
        headers = {"SVC-API-KEY": tenant.key}
        async with aiohttp.ClientSession(first.url) as http:
            async with http.post("/webhooks", headers=headers, json={
                    "url": f"http://127.0.0.1:{server.port}/hook", "events": ["*"]}) as resp:
                hook = await resp.json()
                assert resp.status == 201, hook
            async with http.post("/tokens", headers=headers,
                                 json={"type": "card", "data": CARD}) as resp:
                assert resp.status == 201
        await until(lambda: receiver.holding == 1, what="the delivery under way")
        os.kill(first.pid, signal.SIGKILL)
        await asyncio.to_thread(first._proc.wait)
    finally:
        first.stop()
    receiver.hold = None  # later requests are answered at once (the first one hangs on)
    second = ServiceProcess(env)
    await asyncio.to_thread(second.start)
    try:
        await until(lambda: receiver.received, within=60, what="the delivery after restart")
        [(sent, body)] = receiver.received
        event = Webhook(hook["secret"]).verify(body, sent)
        assert event["type"] == "token.created"
        # The same event (its webhook-id) the dead process was sending.
        assert receiver.arrived == [sent["webhook-id"]] * 2
    finally:
        second.stop()
