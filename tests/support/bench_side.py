"""What the tests of the benchmark's bare side (bench/workloads.py) on the real Neo4j share: a
database, a new bench tenant and an audit writer, and the bare client's contexts over them."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from types import SimpleNamespace

from vaultgraph.catalog import Catalog
from vaultgraph.crypto import KeyRing
from vaultgraph.repository.audit import AuditRepository
from vaultgraph.repository.database import Database
from vaultgraph.services.audit_writer import AuditWriter
from vaultgraph.settings import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:  # bench/ is the checkout's, not the distribution's
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.dataset import create_bench_tenant
from bench.workloads import Context


@contextlib.asynccontextmanager
async def bare_side(settings) -> AsyncIterator[SimpleNamespace]:
    """Yields `db`, `tenant` (a new bench tenant), `audit` (a writer over `db`, not started)
    and `context(ids, **fields)`, a bare client's Context over them; after, the writer is
    stopped, each context closed and the database closed."""
    db = Database.connect(settings.neo4j_uri, settings.neo4j_user,
                          settings.resolved_neo4j_password(), Catalog.load(settings.cypher_dir),
                          settings.neo4j_database)
    ring = KeyRing.from_spec(settings.kek)
    audit = AuditWriter(AuditRepository(db), ring)
    contexts: list[Context] = []

    def context(ids: list[str], **fields) -> Context:
        ctx = Context(it.tenant, ids, db.catalog, db.driver, database=db.database,
                      audit=audit, **fields)
        contexts.append(ctx)
        return ctx

    it = SimpleNamespace(db=db, audit=audit, context=context, tenant=None)
    try:
        it.tenant = await create_bench_tenant(db, ring)
        yield it
    finally:
        await audit.stop()
        for ctx in contexts:
            await ctx.close()
        await db.close()
