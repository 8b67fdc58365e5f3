"""Every term form is answered from an index: `EXPLAIN` the composed statement of each, as the
term that drives the query and as a check on tokens another term found, and refuse a plan that
scans a label, every node or relationship, or a whole index (all tokens, all metadata)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from factories import database

from vaultgraph.repository.search import SearchRepository
from vaultgraph.search.plan import drivers, residual
from vaultgraph.search.query import Limits, parse

SCANS = {"NodeByLabelScan", "AllNodesScan", "RelationshipTypeScan",
         "DirectedRelationshipTypeScan", "UndirectedRelationshipTypeScan",
         "DirectedAllRelationshipsScan", "UndirectedAllRelationshipsScan"}
TERMS = ["id:x", "type:card", "fingerprint:fp", "metadata.customer:c-1", "data:digest",
         "created_at:[2026-01-01 TO *]", "expires_at:{* TO 2030-01-01]", "created_at:2026-01-01",
         "parent:p", "child:c", "ancestor:a", "descendant:d"]
CHECK_ONLY = ["container:/pci/"]


def walk(plan) -> list[str]:
    ops = [plan["operatorType"].split("@")[0]]
    for child in plan.get("children", ()):
        ops += walk(child)
    return ops


async def explain(client, query: str) -> list[str]:
    db = database(client.server.app)
    tree = parse(query, Limits())
    seeks = drivers(tree)
    statement, params = SearchRepository(db).statements.compose(tree, seeks,
                                                                 residual(tree, seeks))
    params.update(tenant_id="t", prefixes=["/"], limit=21,
                  after_at=datetime.now(UTC).isoformat(), after_id="z")
    _, summary, _ = await db.driver.execute_query("EXPLAIN " + statement.text, params,
                                                  database_=db.database)
    return walk(summary.plan)


def assert_index_backed(query: str, ops: list[str]) -> None:
    assert not SCANS & set(ops), (query, ops)
    assert not any(op.endswith("IndexScan") for op in ops), (query, ops)
    assert any("IndexSeek" in op for op in ops), (query, ops)
    assert "CartesianProduct" not in ops, (query, ops)


@pytest.mark.parametrize("term", TERMS)
async def test_each_term_drives_from_an_index(client, term):
    assert_index_backed(term, await explain(client, term))


@pytest.mark.parametrize("term", TERMS + CHECK_ONLY)
async def test_each_term_checks_found_tokens_without_a_scan(client, term):
    for query in (f"type:card AND {term}", f"id:x AND NOT {term}",
                  f"metadata.k:v AND (id:y OR {term})"):
        assert_index_backed(query, await explain(client, query))


async def test_or_unions_one_seek_per_branch(client):
    query = " OR ".join(TERMS)
    ops = await explain(client, query)
    assert_index_backed(query, ops)
    assert ops.count("Union") + ops.count("OrderedUnion") >= len(TERMS) - 1, ops
