"""The webhook_create workload's bare side on the real Neo4j (bench/outbox.py): creates made
as the bare client makes them write their deliveries, and its delivery loop, with the service's
catalog statements, sends each once, signed as the service signs, and records it delivered;
a disabled webhook gets no more. The loop claims any tenant's due deliveries (as the sender
does): what other tests left in the shared database may be claimed too, so only this test's
webhook is asserted on."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
from types import SimpleNamespace

import aiohttp

from vaultgraph.repository.database import Database
from vaultgraph.repository.webhooks import WebhookRepository
from vaultgraph.settings import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:  # bench/ is the checkout's, not the distribution's
    sys.path.insert(0, str(PROJECT_ROOT))

from support.bench_side import bare_side

from bench import outbox
from bench.receiver import Receiver
from bench.run import bare_op
from bench.workloads import WORKLOADS, _new_card

CREATES = 25


async def _attempts(db: Database, webhook_id: str) -> dict[str, int]:
    records, _, _ = await db.driver.execute_query(
        "MATCH (a:WebhookAttempt {webhook_id: $id}) WHERE a.at IS NOT NULL "
        "RETURN a.outcome AS outcome, count(*) AS n", id=webhook_id, database_=db.database)
    return {r["outcome"]: r["n"] for r in records}


@contextlib.asynccontextmanager
async def _bare_webhook(settings, aiohttp_server, name: str, keys=None, **changes):
    """A bench tenant with one webhook `name` to a local receiver, and the bare side's
    webhook_create request running with its delivery loop (settings changed by `changes`):
    yields them, everything stopped and closed after."""
    receiver = Receiver()
    server = await aiohttp_server(receiver.app())
    deliveries = None
    async with bare_side(settings) as it, aiohttp.ClientSession() as session:
        db, tenant = it.db, it.tenant
        try:
            repo = WebhookRepository(db)
            webhook_id, secret = await outbox.subscribe(
                repo, tenant.tenant_id, tenant.keys, str(server.make_url(f"/hook/{name}")),
                name)
            ctx = it.context([], session=session)
            deliveries = outbox.BareDeliveries(
                ctx.webhooks, keys or tenant.keys, session,
                dataclasses.replace(settings, webhook_poll_interval=0.05, **changes))
            ctx.outbox = deliveries.start()
            [workload] = [w for w in WORKLOADS if w.name == "webhook_create"]
            yield SimpleNamespace(db=db, receiver=receiver, server=server, session=session,
                                  tenant=tenant, repo=repo, webhook_id=webhook_id,
                                  secret=secret, ctx=ctx, deliveries=deliveries,
                                  op=bare_op(workload, ctx))
        finally:
            if deliveries is not None:
                await deliveries.stop()


async def test_the_bare_side_delivers_every_create_once_signed(settings, aiohttp_server):
    async with _bare_webhook(settings, aiohttp_server, "bare") as it:
        db, webhook_id, deliveries = it.db, it.webhook_id, it.deliveries
        async with it.session.put(it.server.make_url("/secret/bare"), data=it.secret) as resp:
            assert resp.status == 204
        for _ in range(CREATES):
            await it.op(_new_card(it.ctx))
        waited, left = await outbox.drain(db.driver, db.database, webhook_id, within=30)
        assert left == 0, f"{left} deliveries still pending after {waited}s"
        await deliveries.stop()

        hook = it.receiver.hooks["bare"]
        assert (hook.received, hook.good.count(False)) == (CREATES, 0)
        assert deliveries.delivered >= CREATES  # and any left by other tests, elsewhere
        counts = deliveries.counts()
        assert counts["claims"] >= 1 and counts["records"] >= 1
        assert await outbox.states(db.driver, db.database, webhook_id) == {
            "delivered": CREATES}
        assert await _attempts(db, webhook_id) == {"success": CREATES}
        timed = await outbox.attempt_ms(db.driver, db.database, webhook_id)
        assert timed["attempts"] == CREATES
        assert 0 < timed["attempt_p50_ms"] <= timed["attempt_p99_ms"]

        # Disabled, the webhook is written no more deliveries.
        await outbox.unsubscribe(it.repo, it.tenant.tenant_id, webhook_id)
        await it.op(_new_card(it.ctx))
        assert await outbox.states(db.driver, db.database, webhook_id) == {
            "delivered": CREATES}


class _Broken:
    """Tenant keys whose decryption fails other than as a CryptoError."""

    def decrypt(self, *args, **kwargs):
        raise RuntimeError("broken keys")


async def test_an_attempt_that_fails_is_recorded_as_an_error_and_stops_nothing(
        settings, aiohttp_server):
    async with _bare_webhook(settings, aiohttp_server, "broken", keys=_Broken(),
                             webhook_retry_schedule="600") as it:
        deliveries = it.deliveries
        for _ in range(3):
            await it.op(_new_card(it.ctx))
        for _ in range(300):  # each tried once (the next try is 10 minutes away)
            if sum((await _attempts(it.db, it.webhook_id)).values()) >= 3:
                break
            await asyncio.sleep(0.1)
        await deliveries.stop()
        assert deliveries._task is None and not deliveries._sending
        assert "broken" not in it.receiver.hooks  # nothing was posted
        assert deliveries.first_error == "RuntimeError: broken keys"
        assert await _attempts(it.db, it.webhook_id) == {"error": 3}
