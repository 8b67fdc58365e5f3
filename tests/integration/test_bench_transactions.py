"""The update workload's bare side on the real Neo4j: its transactions take and give back the
kept write sessions, as the service's Database does (repository/database.py), so the
benchmark compares like with like; each update is committed."""

from __future__ import annotations

import sys

import neo4j

from vaultgraph.settings import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:  # bench/ is the checkout's, not the distribution's
    sys.path.insert(0, str(PROJECT_ROOT))

from support.bench_side import bare_side

from bench.dataset import load_tokens
from bench.run import bare_op
from bench.workloads import WORKLOADS


async def test_the_bare_clients_updates_run_in_one_kept_session(settings):
    async with bare_side(settings) as it:
        db, tenant = it.db, it.tenant
        assert await it.audit.open_writes()
        ids = await load_tokens(db, tenant, 0, 3, 3)
        ctx = it.context(ids)
        [workload] = [w for w in WORKLOADS if w.name == "update"]
        op = bare_op(workload, ctx)
        kept = ctx.idle[neo4j.WRITE_ACCESS]
        sessions = []
        for n, token_id in enumerate(ids):  # one at a time: each finds the last one's session
            await op((token_id, {"data": {"expiration_month": n + 1},
                                 "metadata": {"region": f"region-{n}"}}))
            session = kept.take()
            assert session is not None  # given back after its transaction
            sessions.append(session)
            assert kept.give(session)
        assert len({id(s) for s in sessions}) == 1
        records, _, _ = await db.driver.execute_query(  # each update committed
            "MATCH (t:Token {tenant_id: $tenant})-[m:HAS_META]->(t) WHERE t.id IN $ids "
            "AND m.kv STARTS WITH 'region' RETURN t.id AS id, m.kv AS kv",
            tenant=tenant.tenant_id, ids=ids, database_=db.database)
        assert sorted((r["id"], r["kv"]) for r in records) == sorted(
            (token_id, f"region\u001fregion-{n}") for n, token_id in enumerate(ids))
