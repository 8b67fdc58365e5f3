"""What one tenant holds in Neo4j, read back through the driver, to prove that a refused write
changed nothing.

    before = await tenant_snapshot(client, tenant_id)
    ... a request the service refuses ...
    assert await tenant_snapshot(client, tenant_id) == before

A snapshot is every node whose `tenant_id` is the tenant's (and the `Tenant` node itself), with
all its labels and properties, and every relationship touching one of them, with its type,
ends and properties. The audit trail is left out: a refusal is audited by design
(docs/audit.md), and that is the one write a refused request makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from factories import database

AUDIT_LABELS = ("AuditEvent", "PendingAuditEvent", "AuditChain", "AuditCheckpoint")

_NODES = """
MATCH (n)
WHERE (n.tenant_id = $tenant_id OR (n:Tenant AND n.id = $tenant_id))
  AND none(label IN labels(n) WHERE label IN $audit_labels)
RETURN elementId(n) AS element_id, labels(n) AS labels, properties(n) AS props
"""

_EDGES = """
UNWIND $element_ids AS id
MATCH (n)-[r]-() WHERE elementId(n) = id
WITH DISTINCT r
RETURN elementId(r) AS element_id, type(r) AS type, elementId(startNode(r)) AS start,
       elementId(endNode(r)) AS end, properties(r) AS props
"""


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


@dataclass(frozen=True)
class Snapshot:
    """Nodes by element id: (sorted labels, frozen properties); edges likewise, with ends."""

    nodes: dict[str, tuple]
    edges: dict[str, tuple]

    def diff(self, after: Snapshot) -> dict[str, dict]:
        """What changed from self to `after`: added, removed and changed nodes and edges
        (empty maps when nothing did)."""
        out: dict[str, dict] = {}
        for kind in ("nodes", "edges"):
            old, new = getattr(self, kind), getattr(after, kind)
            out[f"added_{kind}"] = {k: new[k] for k in new.keys() - old.keys()}
            out[f"removed_{kind}"] = {k: old[k] for k in old.keys() - new.keys()}
            out[f"changed_{kind}"] = {k: (old[k], new[k]) for k in old.keys() & new.keys()
                                      if old[k] != new[k]}
        return {k: v for k, v in out.items() if v}

    def token_ids(self) -> set[str]:
        """Ids of the live tokens (label Token) in the snapshot."""
        return {dict(props)["id"] for labels, props in self.nodes.values() if "Token" in labels}


async def tenant_snapshot(client, tenant_id: str) -> Snapshot:
    """Everything tenant `tenant_id` holds in Neo4j but its audit trail (see the module)."""
    db = database(client.server.app)
    nodes, _, _ = await db.driver.execute_query(
        _NODES, {"tenant_id": tenant_id, "audit_labels": list(AUDIT_LABELS)},
        database_=db.database, routing_="r")
    assert nodes, f"no node of tenant {tenant_id}: a snapshot of nothing proves nothing"
    ids = [r["element_id"] for r in nodes]
    edges, _, _ = await db.driver.execute_query(
        _EDGES, {"element_ids": ids}, database_=db.database, routing_="r")
    return Snapshot(
        nodes={r["element_id"]: (tuple(sorted(r["labels"])), _freeze(r["props"]))
               for r in nodes},
        edges={r["element_id"]: (r["type"], r["start"], r["end"], _freeze(r["props"]))
               for r in edges},
    )


class Unchanged:
    """`async with Unchanged(client, tenant_id):` — the block may make refused requests only;
    on leaving, the tenant's stored state must equal what it was on entering."""

    def __init__(self, client, tenant_id: str):
        self.client = client
        self.tenant_id = tenant_id
        self.before: Snapshot | None = None

    async def __aenter__(self) -> Unchanged:
        self.before = await tenant_snapshot(self.client, self.tenant_id)
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return
        after = await tenant_snapshot(self.client, self.tenant_id)
        assert self.before is not None
        diff = self.before.diff(after)
        assert diff == {}, f"a refused write changed stored state: {diff}"
