"""The database work of one group commit (docs/audit.md, "Cost and growth"): `PROFILE` of
audit/write_batch over a batch of read-shaped events (created by the batch) and over a batch of
write-shaped events (stored first by a write's own statement, then linked), in a fresh Neo4j
of its own. Database hits and properties set are counted by Neo4j, so unlike CPU time they do
not move from run to run.

    .venv/bin/python -m bench.audit_hits                 # batches of 20
    BENCH_AUDIT_BATCH=50 .venv/bin/python -m bench.audit_hits
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from types import SimpleNamespace
from typing import Any

from vaultgraph.audit import context as audit_context
from vaultgraph.audit.chain import sign
from vaultgraph.crypto import KeyRing
from vaultgraph.neo4j_local import LocalNeo4j
from vaultgraph.repository.audit import created_parts, linked_parts
from vaultgraph.repository.audit_prefix import AUDIT_PREFIX, audited_params

from .audit_storage import _connect, _event, fresh_neo4j, schema
from .environment import new_kek


def _hits(plan: Any) -> int:
    return plan.get("dbHits", 0) + sum(_hits(child) for child in plan.get("children", []))


async def profile(neo: LocalNeo4j, size: int) -> dict:
    db = await _connect(neo)
    ring = KeyRing.from_spec(new_kek())
    tenant, application, key = (str(uuid.uuid4()) for _ in range(3))
    out = {}
    try:
        for kind in ("created", "linked"):
            chain, events = str(uuid.uuid4()), []
            for seq in range(1, size + 1):  # signed as the writer signs (a placed chain's)
                event = {**_event(tenant, application, key), "chain": chain, "seq": seq,
                         "key_version": ring.active}
                event["mac"] = sign(ring, event)
                events.append(event)
            created, linked = [], []
            for event in events:
                if kind == "created":
                    created.append(created_parts(event))
                    continue
                # stored first, as a write's own statement stores it
                note = audit_context.AuditNote(
                    id=event["id"], at=event["at"], operation=event["operation"],
                    route=event["route"], trace_id=event["trace_id"],
                    client_ip=event["client_ip"], user_agent=event["user_agent"],
                    token_ids=list(event["token_ids"]),
                    principal=SimpleNamespace(tenant_id=tenant, application_id=application,
                                              key_id=key))
                # as audit_context.write_event stores it
                stored = audit_context.stored_skeleton(note.skeleton())
                await db.driver.execute_query(AUDIT_PREFIX + "RETURN 1",
                                              audited_params({}, stored),
                                              database_=db.database)
                linked.append(linked_parts(event, stored))
            result = await db.driver.execute_query(
                "PROFILE " + db.catalog.text("audit/write_batch"), database_=db.database,
                created=created, linked=linked, chain=chain, head_seq=size)
            summary = result.summary
            out[kind] = {"db_hits": _hits(summary.profile),
                         "properties_set": summary.counters.properties_set,
                         "events": size}
    finally:
        await db.close()
    return out


def main() -> int:
    size = int(os.environ.get("BENCH_AUDIT_BATCH", "20"))
    with fresh_neo4j("audit-hits", heap="512m", pagecache="128m") as neo:
        neo.start()
        asyncio.run(schema(neo))
        result = asyncio.run(profile(neo, size))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
