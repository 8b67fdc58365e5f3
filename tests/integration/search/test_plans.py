"""Every query runs one statement, `search/page`, and every part of it is answered from an
index: `EXPLAIN` it and refuse a plan that scans a label, every node or relationship, or a
whole index (all tokens, all metadata); each field's seek is an index seek; and `PROFILE` shows
that a field's branch does no work for a query without terms of that field."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from factories import database

from vaultgraph.repository.search import SearchRepository
from vaultgraph.search.plan import CHECK_FIELDS, SEEK_FIELDS, STATEMENT, compile
from vaultgraph.search.query import Limits, parse
from vaultgraph.services.health import Readiness
from vaultgraph.services.startup import Startup

SCANS = {"NodeByLabelScan", "AllNodesScan", "RelationshipTypeScan",
         "DirectedRelationshipTypeScan", "UndirectedRelationshipTypeScan",
         "DirectedAllRelationshipsScan", "UndirectedAllRelationshipsScan"}
# A query with a term of every field, seeking and checked, and a cursor.
EVERY_FIELD = ("(id:xxx OR type:card OR fingerprint:fp OR metadata.customer:c-1 OR data:digest "
               "OR created_at:[2026-01-01 TO *] OR expires_at:{* TO 2030-01-01] OR parent:ppp "
               "OR child:ccc OR ancestor:aaa OR descendant:ddd) AND NOT (id:yyy OR type:bank OR "
               "container:/pci/ OR fingerprint:f2 OR metadata.k:v OR data:d2 OR "
               "created_at:2026-01-01 OR parent:pp2 OR child:cc2 OR ancestor:aa2 OR "
               "descendant:dd2)")


def operators(plan) -> list[dict]:
    out = [plan]
    for child in plan.get("children", ()):
        out += operators(child)
    return out


def name(op: dict) -> str:
    return op["operatorType"].split("@")[0]


def details(op: dict) -> str:
    return str(op.get("args", {}).get("Details", ""))


def branches(plan, kind: str) -> dict[str, dict]:
    """Per field, the subtree that runs once per term of that field: the Apply whose left side
    unwinds `$query.<kind>.<field>` (its right side is the field's branch)."""
    out = {}
    for op in operators(plan):
        children = op.get("children", ())
        if name(op) in ("Apply", "SemiApply") and children:
            left = children[0]
            # EXPLAIN prints `$query.seeks.id` as `($query.seeks).id`.
            text = details(left).replace("(", "").replace(")", "")
            if name(left) == "Unwind" and text.startswith(f"$query.{kind}."):
                out[text.split()[0].rsplit(".", 1)[1]] = op
    return out


async def run(client, mode: str, query: str, tenant_id: str = "t"):
    db = database(client.server.app)
    params = {"tenant_id": tenant_id, "prefixes": ["/"], "limit": 21,
              "query": compile(parse(query, Limits(max_terms=40))).parameter(),
              "after": {"at": datetime.now(UTC).isoformat(), "id": "z"}}
    _, summary, _ = await db.driver.execute_query(f"{mode} " + db.catalog.text(STATEMENT),
                                                  params, database_=db.database)
    return summary


async def test_the_statement_is_answered_from_indexes(client):
    plan = (await run(client, "EXPLAIN", EVERY_FIELD)).plan
    ops = [name(op) for op in operators(plan)]
    assert not SCANS & set(ops), ops
    assert not any(op.endswith("IndexScan") for op in ops), ops
    assert "CartesianProduct" not in ops, ops
    # Each field that can drive a query has a branch of its own, seeking an index for it.
    seeks = branches(plan, "seeks")
    assert sorted(seeks) == sorted(SEEK_FIELDS)
    for field, branch in seeks.items():
        assert any("IndexSeek" in name(op) for op in operators(branch)), field
    # Checks on what the seeks found: a branch for the token's own entries, expressions on
    # the token itself, and the graph fields' checks walk in their seek branches; every field
    # is checked somewhere.
    checks = branches(plan, "checks")
    assert sorted(checks) == ["data", "metadata"]
    text = "\n".join(details(op) for op in operators(plan)).replace("(", "").replace(")", "")
    for field in CHECK_FIELDS:
        assert f"$query.checks.{field}" in text, field


async def test_a_branch_does_nothing_for_a_query_without_its_field(api, client):
    await api.create({"type": "card", "id": "c-1", "metadata": {"k": "v"},
                      "data": {"number": "4242424242424242", "expiration_month": 1,
                               "expiration_year": 2030}})
    tenant_id = (await api.get("c-1"))["tenant_id"]
    plan = (await run(client, "PROFILE", "type:card AND NOT metadata.k:w", tenant_id)).profile
    seeks, checks = branches(plan, "seeks"), branches(plan, "checks")

    def hits(branch) -> int:
        right = branch["children"][1]
        return sum(op.get("dbHits", 0) for op in operators(right))

    assert hits(seeks["type"]) > 0 and hits(checks["metadata"]) > 0
    assert [f for f, b in seeks.items() if f != "type" and hits(b)] == []
    assert [f for f, b in checks.items() if f != "metadata" and hits(b)] == []


async def test_start_up_plans_the_statement_before_the_service_is_ready(client):
    db = database(client.server.app)
    await SearchRepository(db).prepare()  # EXPLAINs, with parameters as a page sends them
    calls = []
    readiness = Readiness(db)
    readiness.started = False  # as in a background start-up

    async def failing() -> None:
        calls.append(readiness.started)
        raise RuntimeError("planning failed")

    await Startup(db, readiness, None, 0, prepare=failing).run()
    # Called before the service said it was ready; its failure only costs the first search
    # the wait: the service is ready all the same.
    assert calls == [False] and readiness.started


async def test_a_start_up_that_begins_again_plans_the_statement_once(client, monkeypatch):
    # Neo4j goes on planning after a client gives up, so planning the statement again on each
    # attempt of a start-up only added work (a busy machine's start-up never turned ready).
    from vaultgraph.errors import Unavailable
    from vaultgraph.services import startup as startup_module

    db = database(client.server.app)
    real, attempts, calls = startup_module.prepare, [], []
    planning, released = asyncio.Event(), asyncio.Event()

    async def first_times_out(*args, **kwargs):
        attempts.append(1)
        if len(attempts) == 1:
            await planning.wait()  # the statement's planning is under way
            raise Unavailable("Neo4j did not answer the warm-up in time.")
        released.set()
        return await real(*args, **kwargs)

    async def plan() -> None:
        calls.append(1)
        planning.set()
        await released.wait()

    monkeypatch.setattr(startup_module, "prepare", first_times_out)
    readiness = Readiness(db)
    readiness.started = False
    await Startup(db, readiness, None, 0, max_pause=0.01, prepare=plan).run()
    assert len(attempts) == 2 and calls == [1] and readiness.started
