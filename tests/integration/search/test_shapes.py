"""Random queries drawn from the grammar, against the real Neo4j: each answer is the set
algebra of its terms' own answers (AND: both, OR: either, NOT: every other visible token),
newest first and the same across pages; and however many shapes arrive, the statement texts
sent to Neo4j are the ones the first search sent (one search statement, planned once)."""

from __future__ import annotations

import random

import neo4j
import pytest
from factories import database

from vaultgraph.search.plan import STATEMENT, UNINDEXED, compile
from vaultgraph.search.query import Limits, parse

from .conftest import every, found, search
from .test_fields import NEWEST_FIRST, seed

QUERIES = 150
ALL = "created_at:[* TO *]"  # every visible token (a seek: it may stand alone)


@pytest.fixture
def sent(monkeypatch) -> list[str]:
    """The text of every statement a session sends (the real driver call, recorded)."""
    texts: list[str] = []
    run = neo4j.AsyncSession.run

    async def recording(self, query, *args, **kwargs):
        texts.append(query.text if isinstance(query, neo4j.Query) else str(query))
        return await run(self, query, *args, **kwargs)

    monkeypatch.setattr(neo4j.AsyncSession, "run", recording)
    return texts


def draw(rng: random.Random, leaves: list[str], depth: int):
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(leaves)
    op = rng.choice(["AND", "OR", "NOT"])
    if op == "NOT":
        return ("NOT", draw(rng, leaves, depth - 1))
    return (op, [draw(rng, leaves, depth - 1) for _ in range(rng.randint(2, 3))])


def text(tree) -> str:
    if isinstance(tree, str):
        return tree
    if tree[0] == "NOT":
        return f"NOT ({text(tree[1])})"
    return f" {tree[0]} ".join(f"({text(c)})" for c in tree[1])


def count(tree) -> int:
    if isinstance(tree, str):
        return 1
    return count(tree[1]) if tree[0] == "NOT" else sum(count(c) for c in tree[1])


def meaning(tree, sets: dict[str, set[str]], universe: set[str]) -> set[str]:
    if isinstance(tree, str):
        return sets[tree]
    if tree[0] == "NOT":
        return universe - meaning(tree[1], sets, universe)
    parts = [meaning(c, sets, universe) for c in tree[1]]
    return set.intersection(*parts) if tree[0] == "AND" else set.union(*parts)


async def test_random_queries_are_the_set_algebra_of_their_terms(api, client, sent):
    tokens = await seed(api)
    leaves = ["type:card", "type:bank", "type:token", "metadata.customer:c-1",
              "metadata.status:active", "data:4242", "data:4444", "parent:cust-ada",
              "child:note", "ancestor:cust-ada", "descendant:note", "id:note", "id:cust-ada",
              "expires_at:[* TO *]", ALL, "container:/pci/", "container:/general/",
              f"fingerprint:{tokens['card-mc']['fingerprint']}"]
    universe = set(await found(api, ALL))
    assert universe == set(NEWEST_FIRST)
    # Each term's own answer (a container term is only a check: narrowed from every token).
    sets = {leaf: set(await found(api, leaf if not leaf.startswith("container:")
                                  else f"{ALL} AND {leaf}")) for leaf in leaves}
    assert all(sets.values()) and len({frozenset(s) for s in sets.values()}) > 8
    search_text = database(client.server.app).catalog.text(STATEMENT)
    first = set(sent)
    assert search_text in first
    sent.clear()

    rng = random.Random(36)  # reproducible shapes
    answered = refused = 0
    for n in range(QUERIES):
        tree = draw(rng, leaves, 3)
        while count(tree) > 20:
            tree = draw(rng, leaves, 3)
        query = text(tree)
        if compile(parse(query, Limits())) is None:
            body = await search(api, query, 400)
            assert body["errors"] == {"query": [UNINDEXED]}, query
            refused += 1
            continue
        expected = [i for i in NEWEST_FIRST if i in meaning(tree, sets, universe)]
        got = await every(api, query, 2) if n % 5 == 0 else await found(api, query)
        assert got == expected, query
        answered += 1
    assert answered > QUERIES // 2 and refused > 0
    # 150 shapes, and not one statement text the first search did not send.
    assert set(sent) <= first and search_text in sent
