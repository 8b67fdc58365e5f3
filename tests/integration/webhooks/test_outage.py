"""A Neo4j outage loses no event: a delivery whose outcome cannot be recorded (Neo4j went
away while the endpoint answered) is recorded once Neo4j is back, and the sender's passes,
failing meanwhile, resume by themselves."""

from __future__ import annotations

import asyncio

from factories import new_tenant
from hardening.conftest import BoltProxy, neo4j_address
from prometheus_client import REGISTRY

from .conftest import attempts_when, make_token, make_webhook, until

UNAVAILABLE = ("vaultgraph_neo4j_errors_total", {"kind": "unavailable"})


def unavailable() -> float:
    return REGISTRY.get_sample_value(*UNAVAILABLE) or 0.0


async def test_an_outcome_met_during_an_outage_is_recorded_after_it(
        settings, delivering, receiver, dead_sockets_collected):
    proxy = BoltProxy(*neo4j_address(settings))
    proxy.reserve()
    await proxy.up()
    try:
        client = await delivering(neo4j_uri=proxy.uri)
        tenant = await new_tenant(client.server.app)
        headers = {"SVC-API-KEY": tenant.key}
        hook = await make_webhook(client, headers, url=receiver.url)
        receiver.hold = asyncio.Event()
        await make_token(client, headers)
        await until(lambda: receiver.holding == 1, what="the delivery under way")
        await proxy.down()
        before = unavailable()
        receiver.hold.set()  # the endpoint answers 200 while Neo4j is away
        await until(lambda: receiver.received, what="the answer")
        await until(lambda: unavailable() > before, what="the sender meeting the outage")
        await proxy.up()
        found = await attempts_when(client, headers, hook["id"], 1)
        assert (found[0]["outcome"], found[0]["status"]) == ("success", 200)
        ids = {sent["webhook-id"] for sent, _ in receiver.received}
        assert ids == {found[0]["event_id"]}  # at least once: the same event, never another
        receiver.hold = None
        await make_token(client, headers)  # and new events flow again
        await until(lambda: len({s["webhook-id"] for s, _ in receiver.received}) == 2,
                    what="the next event")
    finally:
        await proxy.down()  # its listening socket, else left to the garbage collector
