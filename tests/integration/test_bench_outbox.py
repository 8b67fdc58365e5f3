"""The webhook_create workload's bare side on the real Neo4j (bench/outbox.py): creates made
as the bare client makes them write their deliveries, and its delivery loop, with the service's
catalog statements, sends each once, signed as the service signs, and records it delivered;
a disabled webhook gets no more."""

from __future__ import annotations

import dataclasses
import sys

import aiohttp

from vaultgraph.catalog import Catalog
from vaultgraph.crypto import KeyRing
from vaultgraph.repository.audit import AuditRepository
from vaultgraph.repository.database import Database
from vaultgraph.repository.webhooks import WebhookRepository
from vaultgraph.services.audit_writer import AuditWriter
from vaultgraph.settings import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:  # bench/ is the checkout's, not the distribution's
    sys.path.insert(0, str(PROJECT_ROOT))

from bench import outbox
from bench.dataset import create_bench_tenant
from bench.receiver import Receiver
from bench.run import bare_op
from bench.workloads import WORKLOADS, Context, _new_card

CREATES = 25


async def _attempts(db: Database, webhook_id: str) -> dict[str, int]:
    records, _, _ = await db.driver.execute_query(
        "MATCH (a:WebhookAttempt {webhook_id: $id}) WHERE a.at IS NOT NULL "
        "RETURN a.outcome AS outcome, count(*) AS n", id=webhook_id, database_=db.database)
    return {r["outcome"]: r["n"] for r in records}


async def test_the_bare_side_delivers_every_create_once_signed(settings, aiohttp_server):
    db = Database.connect(settings.neo4j_uri, settings.neo4j_user,
                          settings.resolved_neo4j_password(), Catalog.load(settings.cypher_dir),
                          settings.neo4j_database)
    ring = KeyRing.from_spec(settings.kek)
    receiver = Receiver()
    server = await aiohttp_server(receiver.app())
    audit = AuditWriter(AuditRepository(db), ring)
    session = aiohttp.ClientSession()
    try:
        tenant = await create_bench_tenant(db, ring)
        repo = WebhookRepository(db)
        webhook_id, secret = await outbox.subscribe(
            repo, tenant.tenant_id, tenant.keys, str(server.make_url("/hook/bare")), "bare")
        async with session.put(server.make_url("/secret/bare"), data=secret) as resp:
            assert resp.status == 204
        ctx = Context(tenant, [], db.catalog, db.driver, database=db.database, audit=audit,
                      session=session)
        deliveries = outbox.BareDeliveries(
            ctx.webhooks, tenant.keys, session,
            dataclasses.replace(settings, webhook_poll_interval=0.05))
        ctx.outbox = deliveries.start()
        [workload] = [w for w in WORKLOADS if w.name == "webhook_create"]
        op = bare_op(workload, ctx)
        for _ in range(CREATES):
            await op(_new_card(ctx))
        waited, left = await outbox.drain(db.driver, db.database, webhook_id, within=30)
        assert left == 0, f"{left} deliveries still pending after {waited}s"
        await deliveries.stop()

        hook = receiver.hooks["bare"]
        assert (hook.received, hook.bad) == (CREATES, 0)
        assert (deliveries.delivered, deliveries.failed, deliveries.errors) == (CREATES, 0, 0)
        assert await outbox.states(db.driver, db.database, webhook_id) == {
            "delivered": CREATES}
        assert await _attempts(db, webhook_id) == {"success": CREATES}

        # Disabled, the webhook is written no more deliveries.
        await outbox.unsubscribe(repo, tenant.tenant_id, webhook_id)
        await op(_new_card(ctx))
        assert await outbox.states(db.driver, db.database, webhook_id) == {
            "delivered": CREATES}
    finally:
        await session.close()
        await audit.stop()
        await db.close()
