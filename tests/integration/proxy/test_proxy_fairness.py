"""One tenant's proxy calls waiting on a slow destination cannot take every outbound
connection: past `VAULTGRAPH_PROXY_MAX_IN_FLIGHT` its calls wait for one of its own places
(a 429, with nothing sent, when none comes within the call's time limit), and other tenants'
calls go through meanwhile."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from aiohttp import web
from factories import new_tenant

from vaultgraph.services import proxy as proxy_service

from ._support import create_proxy


@pytest.fixture
def settings(settings):
    """http and 127.0.0.1 allowed (the destinations are local); two calls a tenant at once."""
    return dataclasses.replace(settings, webhook_allow_http=True,
                               webhook_allowed_networks="127.0.0.1/32", proxy_max_in_flight=2)


@pytest.fixture
async def slow_destination(aiohttp_server):
    """Answers `/slow` once released, anything else at once; records the paths it got."""
    state = {"release": asyncio.Event(), "arrived": []}

    async def handle(request: web.Request) -> web.Response:
        state["arrived"].append(request.path)
        if request.path.endswith("/slow"):
            await state["release"].wait()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server = await aiohttp_server(app, host="127.0.0.1")
    state["base"] = f"http://127.0.0.1:{server.port}"
    return state


async def _until(condition, what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def _two_waiting(client, headers, proxy_id, state) -> list[asyncio.Task]:
    waiting = [asyncio.create_task(client.get(f"/proxy/{proxy_id}/slow", headers=headers))
               for _ in range(2)]
    await _until(lambda: len(state["arrived"]) == 2, "both calls reached the destination")
    return waiting


async def test_a_tenants_calls_past_its_limit_wait_while_other_tenants_go_through(
        client, admin_headers, slow_destination):
    state = slow_destination
    mine = await create_proxy(client, admin_headers, state["base"])
    other = await new_tenant(client.server.app, "other")
    other_headers = {"SVC-API-KEY": other.key}
    theirs = await create_proxy(client, other_headers, state["base"])

    waiting = await _two_waiting(client, admin_headers, mine["id"], state)
    third = asyncio.create_task(client.get(f"/proxy/{mine['id']}/third", headers=admin_headers))
    passed = await client.get(f"/proxy/{theirs['id']}/fast", headers=other_headers)
    assert passed.status == 200 and await passed.text() == "ok"
    assert state["arrived"] == ["/slow", "/slow", "/fast"]  # the third call has sent nothing
    assert not third.done()

    state["release"].set()
    answers = await asyncio.gather(*waiting, third)
    assert [r.status for r in answers] == [200, 200, 200]
    assert state["arrived"][-1] == "/third"


async def test_a_call_that_gets_no_place_in_time_is_a_429_and_sends_nothing(
        client, admin_headers, slow_destination, monkeypatch):
    state = slow_destination
    mine = await create_proxy(client, admin_headers, state["base"])
    waiting = await _two_waiting(client, admin_headers, mine["id"], state)
    monkeypatch.setattr(proxy_service, "CALL_TIME_LIMIT", 0.3)  # this call's wait only
    refused = await client.get(f"/proxy/{mine['id']}/late", headers=admin_headers)
    monkeypatch.undo()
    assert refused.status == 429
    assert refused.headers["Retry-After"] == "1"
    assert "SVC-PROXY-STATUS" not in refused.headers
    assert "nothing was sent" in (await refused.json())["detail"]
    assert state["arrived"] == ["/slow", "/slow"]
    state["release"].set()
    assert [r.status for r in await asyncio.gather(*waiting)] == [200, 200]
    again = await client.get(f"/proxy/{mine['id']}/late", headers=admin_headers)
    assert again.status == 200  # the places are given back
