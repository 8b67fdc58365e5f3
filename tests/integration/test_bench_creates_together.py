"""The create workload's bare side on the real Neo4j: its creates are written together as the
service's are (repository/coalesce.py), so the benchmark compares like with like. Creates made
at once by the bare client share statements; each token is stored once, with its own write
event, signed at its own place; with a batch of at most one, each is sent alone."""

from __future__ import annotations

import asyncio
import sys

from prometheus_client import REGISTRY

from vaultgraph.audit.ids import query_ids
from vaultgraph.settings import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:  # bench/ is the checkout's, not the distribution's
    sys.path.insert(0, str(PROJECT_ROOT))

from support.bench_side import bare_side

from bench.run import bare_op
from bench.workloads import WORKLOADS, _new_card

CREATES = 40


def batches() -> tuple[float, float]:
    """Statements of creates written together so far, and the creates they held."""
    return (REGISTRY.get_sample_value("vaultgraph_creates_written_together_count") or 0.0,
            REGISTRY.get_sample_value("vaultgraph_creates_written_together_sum") or 0.0)


async def _bare_creates(settings, **context) -> tuple[tuple[float, float], dict]:
    """CREATES creates made at once by the bare client: the batches written meanwhile, and
    what the tenant then holds (tokens, and write events of each)."""
    async with bare_side(settings) as it:
        db, tenant, audit = it.db, it.tenant, it.audit
        assert await audit.open_writes()  # as after the benchmark's warm-up: events placed
        ctx = it.context([], **context)
        [workload] = [w for w in WORKLOADS if w.name == "create"]
        op = bare_op(workload, ctx)
        before = batches()
        await asyncio.gather(*(op(_new_card(ctx)) for _ in range(CREATES)))
        after = batches()
        await audit.stop()  # every event written and settled
        parts = query_ids(tenant_id=tenant.tenant_id)
        records, _, _ = await db.driver.execute_query(
            "MATCH (t:Token {tenant_id: $tenant}) RETURN count(t) AS tokens",
            tenant=tenant.tenant_id, database_=db.database)
        tokens = records[0]["tokens"]
        records, _, _ = await db.driver.execute_query(
            "MATCH (e:WriteAuditEvent) WHERE e.tenant_key = $k AND e.tenant_rest = $r "
            "RETURN count(e) AS events, count(DISTINCT [e.chain, e.seq]) AS places, "
            "       count(DISTINCT [e.token_key, e.token_rest]) AS named",
            k=parts["tenant_key"], r=parts["tenant_rest"], database_=db.database)
        held = {"tokens": tokens, **records[0].data()}
        return (after[0] - before[0], after[1] - before[1]), held


async def test_the_bare_clients_creates_at_once_are_written_together(settings):
    (statements, rows), held = await _bare_creates(settings)
    assert statements >= 1 and rows > statements  # some statements held several creates
    assert held == {"tokens": CREATES, "events": CREATES, "places": CREATES,
                    "named": CREATES}


async def test_a_batch_of_one_sends_each_bare_create_alone(settings):
    (statements, rows), held = await _bare_creates(settings, create_batch_max=1)
    assert (statements, rows) == (0, 0)
    assert held == {"tokens": CREATES, "events": CREATES, "places": CREATES,
                    "named": CREATES}
