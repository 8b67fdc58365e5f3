"""The outbox costs a tenant without webhooks one index seek: every statement that writes
webhook events finds the tenant's enabled webhooks by a seek on (tenant_id, status), and the
sender's statements seek too (no label scan anywhere)."""

from __future__ import annotations

import pytest
from factories import database

SCANS = {"NodeByLabelScan", "AllNodesScan", "RelationshipTypeScan",
         "DirectedAllRelationshipsScan", "UndirectedAllRelationshipsScan"}
PARAMS = {
    "tenant_id": "00000000-0000-0000-0000-000000000000", "id": "some-id", "after": "",
    "prefixes": ["/"], "meta_kvs": [], "index_digests": [], "parent_prefixes": [],
    "dedup": True, "expires_at": None, "props": {"type": "card", "fingerprint": "fp"},
}
OUTBOX = ["tokens/create", "tokens/create_many", "tokens/update", "tokens/delete",
          "graph/link", "graph/unlink", "expiry/sweep"]
SENDER = ["webhooks/claim", "webhooks/complete", "webhooks/release", "webhooks/deliveries",
          "webhooks/list", "webhooks/update", "webhooks/delete", "webhooks/prune"]
EXTRA = {"rows": [], "batch": 10, "limit": 10, "scan": 100, "lease_ms": 1000, "claim": "c",
         "busy": [], "room": {"w": 2}, "room_default": 4, "webhook_id": "w",
         "outcomes": [{"n": 0, "webhook_id": "w", "event_id": "e", "claim": "c",
                       "success": False, "outcome": "status", "status": 500, "error": None,
                       "duration_ms": 1.0, "response": "", "retry_ms": 5000}],
         "deliveries": [{"webhook_id": "w", "event_id": "e", "claim": "c"}],
         "disable_after_ms": 1000,
         "before_at": "2026-01-01T00:00:00Z", "before_id": "~", "changes": {}, "actor": "a",
         "reason": "deleted", "merged_into": None, "event": {}, "parent_id": "p",
         "child_id": "c", "expired_actor": "x", "expired_reason": "expired",
         "retention_ms": 1000, "delivered_ms": 1000}


def walk(plan) -> list[tuple[str, str]]:
    ops = [(plan["operatorType"].split("@")[0], str(plan.get("args", {}).get("Details", "")))]
    for child in plan.get("children", ()):
        ops += walk(child)
    return ops


async def _ops(client, name: str) -> list[tuple[str, str]]:
    db = database(client.server.app)
    _, summary, _ = await db.driver.execute_query(
        "EXPLAIN " + db.catalog.text(name), {**PARAMS, **EXTRA}, database_=db.database)
    return walk(summary.plan)


@pytest.mark.parametrize("name", OUTBOX)
async def test_writes_find_webhooks_by_an_index_seek(client, name):
    ops = await _ops(client, name)
    assert any("Seek" in op and "Webhook(tenant_id, status)" in details
               for op, details in ops), (name, ops)
    assert not any(op in SCANS and "Webhook" in details for op, details in ops), (name, ops)


@pytest.mark.parametrize("name", SENDER)
async def test_the_senders_statements_scan_nothing(client, name):
    ops = await _ops(client, name)
    assert not SCANS & {op for op, _ in ops}, (name, ops)


async def test_a_claim_reads_the_due_deliveries_in_index_order_and_stops_at_its_scan(client):
    # A sort over every due delivery (Top) would read a whole backlog on every claim.
    ops = await _ops(client, "webhooks/claim")
    names = [op for op, _ in ops]
    seek = next(i for i, (op, details) in enumerate(ops)
                if op == "NodeIndexSeek" and "WebhookDelivery(state, next_at)" in details)
    above = names[:seek]
    assert "Limit" in above, ops
    assert not any(op in ("Top", "Sort", "PartialTop") and "$scan" in details
                   for op, details in ops), ops
