"""docs/webhooks.md's receiver runs as written: its Python block is the receiver of a live
vault's webhook (the in-process app, its sender delivering to 127.0.0.1), it accepts the
signed event and refuses a forged one."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from pathlib import Path

import pytest

from vaultgraph.app import create_app

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
CARD = {"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030,
        "cvc": "123"}


def receiver_source() -> str:
    section = DOC.read_text().split("## A receiver", 1)[1]
    [block] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    return block


@pytest.fixture(scope="module")
def settings(settings):
    return dataclasses.replace(settings, expiry_sweep_interval=3600.0, webhook_allow_http=True,
                               webhook_allowed_networks="127.0.0.0/8",
                               webhook_poll_interval=0.05)


async def test_the_documented_receiver_verifies_a_live_delivery(
        settings, aiohttp_client, aiohttp_server, monkeypatch, capsys):
    from factories import new_tenant

    vault = await aiohttp_client(create_app(settings, schema_applied=True))
    tenant = await new_tenant(vault.server.app)
    headers = {"SVC-API-KEY": tenant.key}
    # The receiver's URL is known once it listens; its secret once the webhook exists: the
    # webhook is made first, pointing at a reserved port, then moved to the receiver.
    resp = await vault.post("/webhooks", headers=headers, json={
        "url": "http://127.0.0.1:9/vaultgraph", "events": ["token.created"]})
    hook = await resp.json()
    assert resp.status == 201, hook
    monkeypatch.setenv("WEBHOOK_SECRET", hook["secret"])
    namespace: dict = {"__name__": "receiver"}
    exec(compile(receiver_source(), str(DOC), "exec"), namespace)  # the doc is our own
    server = await aiohttp_server(namespace["app"], host="127.0.0.1")
    resp = await vault.patch(f"/webhooks/{hook['id']}", headers={
        **headers, "Content-Type": "application/merge-patch+json"},
        json={"url": f"http://127.0.0.1:{server.port}/vaultgraph"})
    assert resp.status == 200

    resp = await vault.post("/tokens", headers=headers, json={"type": "card", "data": CARD})
    token = await resp.json()
    loop = asyncio.get_running_loop()
    until = loop.time() + 20
    while f"token.created {token['id']}" not in capsys.readouterr().out:
        assert loop.time() < until, "the receiver printed no event"
        await asyncio.sleep(0.05)

    # A forged delivery (right headers, wrong signature) is refused.
    client = await aiohttp_client(server)
    forged = await client.post("/vaultgraph", data=b'{"type": "token.deleted"}', headers={
        "webhook-id": "msg_1", "webhook-timestamp": str(int(time.time())),
        "webhook-signature": "v1,AAAA"})
    assert forged.status == 400
