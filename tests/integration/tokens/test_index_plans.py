"""Every token statement finds its tokens through an index (docs/tokens-and-expressions.md):
`EXPLAIN` each one on the app's driver and refuse a plan that scans a label or every node — and, for
the list statements, one whose page costs more than its size."""

from __future__ import annotations

import pytest
from factories import database

SCANS = {"NodeByLabelScan", "AllNodesScan", "RelationshipTypeScan",
         "DirectedAllRelationshipsScan", "UndirectedAllRelationshipsScan"}

PARAMS = {
    "tenant_id": "00000000-0000-0000-0000-000000000000", "id": "some-id", "into": "other-id",
    "after": "", "limit": 21, "prefixes": ["/"], "ids": ["a", "b"], "types": ["card", "token"],
    "meta_kvs": ["colour\u001fred", "size\u001fl"], "index_digests": ["d1"], "type": "card",
    "fingerprint": "fp",
    "parent_id": None, "parent_prefixes": [], "dedup": True, "expires_at": None,
    "props": {"type": "card", "fingerprint": "fp"}, "actor": "app", "reason": "deleted",
    "merged_into": None, "expired_actor": "expiry", "expired_reason": "expired",
}

LIST_STATEMENTS = ["tokens/list", "tokens/list_by_ids", "tokens/list_by_type",
                   "tokens/list_by_metadata"]


def walk(plan) -> list[tuple[str, str]]:
    """(operator, details) for every operator of a plan tree; names lose any `@db` suffix."""
    ops = [(plan["operatorType"].split("@")[0], str(plan.get("args", {}).get("Details", "")))]
    for child in plan.get("children", ()):
        ops += walk(child)
    return ops


async def explain(client, name: str) -> list[tuple[str, str]]:
    """The plan of a catalog statement, on the app's own driver and catalog."""
    db = database(client.server.app)
    _, summary, _ = await db.driver.execute_query(
        "EXPLAIN " + db.catalog.text(name), PARAMS, database_=db.database)
    return walk(summary.plan)


def names(ops) -> list[str]:
    return [op for op, _ in ops]


@pytest.mark.parametrize("name", LIST_STATEMENTS)
async def test_list_statement_is_index_backed(client, name):
    ops = await explain(client, name)
    assert not SCANS & set(names(ops)), ops
    assert any("IndexSeek" in op for op in names(ops)), ops
    assert "CartesianProduct" not in names(ops), ops


async def test_every_token_statement_is_index_backed(client):
    for name in database(client.server.app).catalog.names("tokens"):
        ops = await explain(client, name)
        assert not SCANS & set(names(ops)), (name, ops)
        # A full index scan reads the whole index: as bad as a label scan at scale.
        assert not any(op.endswith("IndexScan") for op in names(ops)), (name, ops)


async def test_no_token_statement_reads_the_expiry_index(client):
    # `expires_at IS NULL OR expires_at > now` invites the planner to union a range scan of
    # every future-expiring token of every tenant into a lookup by id; only the sweeper may
    # seek by expiry.
    for name in database(client.server.app).catalog.names("tokens"):
        ops = await explain(client, name)
        assert not any("(expires_at)" in details for _, details in ops), (name, ops)


@pytest.mark.parametrize("name", ["tokens/list", "tokens/list_by_metadata"])
async def test_list_page_is_read_in_index_order(client, name):
    # No sort of every match before the limit: the index gives the order, the page its size.
    ops = await explain(client, name)
    assert not {"Sort", "Top", "PartialSort", "PartialTop"} & set(names(ops)), ops
    assert "Limit" in names(ops), ops


async def test_list_by_type_reads_at_most_a_page_per_type(client):
    ops = await explain(client, "tokens/list_by_type")
    seek = next(d for op, d in ops if op == "NodeIndexSeek")
    assert "(tenant_id, type, id)" in seek and "id > $after" in seek, seek
    # The per-type run is cut by a Limit before the merge sorts what is left.
    assert names(ops).index("Limit") > names(ops).index("Top"), ops


async def test_list_by_metadata_seeks_the_metadata_entry_index(client):
    ops = await explain(client, "tokens/list_by_metadata")
    seek = next(d for op, d in ops if "RelationshipIndexSeek" in op)
    assert "HAS_META(tenant_id, kv, token_id)" in seek and "token_id > $after" in seek, seek


async def test_list_by_ids_seeks_each_id(client):
    ops = await explain(client, "tokens/list_by_ids")
    seek = next(d for op, d in ops if op == "NodeUniqueIndexSeek")
    assert "id = wanted" in seek, seek


@pytest.mark.parametrize("name", ["tokens/create", "tokens/update", "graph/link"])
async def test_a_write_with_its_audit_event_and_idempotency_mark_is_index_backed(client, name):
    # Inside a request every write carries the audit prefix: the event, and the mark on the
    # request's Idempotency-Key entry (a seek on the entry's key, never a scan of the entries).
    from vaultgraph.repository.audit_prefix import audited_text

    db = database(client.server.app)
    params = {**PARAMS, "parent_id": "p", "child_id": "c", "audit": {"token_key": 1},
              "audit_at": None, "idem_application": "app", "idem_key": "k", "idem_claim": "c",
              "idem_written": {"token_ids": ["x"]}}
    _, summary, _ = await db.driver.execute_query(
        "EXPLAIN " + audited_text(db.catalog.text(name)), params, database_=db.database)
    ops = walk(summary.plan)
    assert not SCANS & set(names(ops)), (name, ops)
    assert any("IdempotencyKey" in details and "Seek" in op for op, details in ops), ops
