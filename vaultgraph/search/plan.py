"""How a query runs: which of its terms drive it from an index, and the data the one search
statement (`cypher/search/page.cypher`) takes in place of query text.

A term on `id`, `type`, `fingerprint`, `metadata.<key>`, `data`, a date or a graph field is a
seek in an index; `container` and anything under `NOT` is only a check on tokens found by
seeks. An `AND` is driven by its most selective child that can drive, an `OR` by the union of
all its children (each must be able to drive). A query that no seek can answer is refused:
it would read every token of the tenant.

`compile` turns a tree into a `Plan`: per field, its seeking and its checked terms, and its
boolean tree in postfix (`program`). The statement's text is the same for every query; only
this one map parameter changes, so a new query shape costs Neo4j no planning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .query import And, Leaf, Node, Not, Range, Term, leaves

# Most selective first: a lookup by id finds one token, a type finds a share of the tenant.
_RANK = {"id": 0, "fingerprint": 1, "data": 2, "parent": 3, "child": 4, "metadata": 5,
         "descendant": 6, "ancestor": 7, "created_at": 8, "expires_at": 9, "type": 10}
UNINDEXED = ("The query cannot be answered from an index: it needs at least one term on id, "
             "type, fingerprint, data, metadata.<key>, created_at, expires_at, parent, child, "
             "ancestor or descendant that every match must satisfy (`container:` and `NOT` "
             "terms only narrow what those find).")
# The one statement every search runs.
STATEMENT = "search/page"
# The fields that can drive a query, and those that can be checked on what they find.
SEEK_FIELDS = tuple(_RANK)
CHECK_FIELDS = (*SEEK_FIELDS, "container")
# The checks the statement makes on a candidate's own properties.
PROPERTY_CHECKS = ("id", "type", "container", "fingerprint", "created_at", "expires_at")
# The program's operators (a term is its place in the query, 0 and up).
AND, OR, NOT = -1, -2, -3


def _cost(leaves_: tuple[Leaf, ...]) -> tuple[int, int]:
    return len(leaves_), max(_RANK[leaf.field] for leaf in leaves_)


def drivers(node: Node) -> tuple[Leaf, ...] | None:
    """The seeks that find a superset of the matches, or None when no seek can."""
    if isinstance(node, (Term, Range)):
        return (node,) if node.field in _RANK else None
    if isinstance(node, Not):
        return None
    found = [drivers(child) for child in node.children]
    if isinstance(node, And):
        usable = [d for d in found if d is not None]
        return min(usable, key=_cost) if usable else None
    if any(d is None for d in found):
        return None
    out: list[Leaf] = []
    for d in found:
        out.extend(leaf for leaf in d if not _among(leaf, out))
    return tuple(out)


def _among(node: Node, seeks) -> bool:
    # By identity, not equality: which seeks a query runs depends on its shape, never on
    # whether two of its values happen to be equal.
    return any(node is seek for seek in seeks)


@dataclass(frozen=True, slots=True)
class Plan:
    """The search statement's `$query` for one query: per field, the terms that seek and the
    terms checked on what they find (every field present, most lists empty), and the boolean
    tree in postfix."""

    seeks: dict[str, list[dict[str, Any]]]
    checks: dict[str, list[dict[str, Any]]]
    program: list[int]

    @property
    def terms(self) -> int:
        """The query's number of terms: its weight in the rate limit."""
        return sum(map(len, self.seeks.values())) + sum(map(len, self.checks.values()))

    def parameter(self) -> dict[str, Any]:
        """The statement's `$query`: one map, whatever the query (Neo4j keys its plan cache by
        each parameter's type, and a list's or a string's size class; a map is only a map)."""
        seeking = sorted(t["i"] for terms in self.seeks.values() for t in terms)
        properties = any(self.checks[f] for f in PROPERTY_CHECKS)
        return {"seeks": self.seeks, "checks": self.checks, "seeking": seeking,
                "properties": properties, "program": self.program}


def _term(place: int, leaf: Leaf) -> dict[str, Any]:
    if isinstance(leaf, Term):
        return {"i": place, "value": leaf.value}
    return {"i": place, "low": leaf.low, "high": leaf.high, "low_inclusive": leaf.low_inclusive,
            "high_inclusive": leaf.high_inclusive}


def _postfix(node: Node, places: dict[int, int], out: list[int]) -> None:
    # Recursive: the parse has bounded the depth (Limits.max_depth).
    if isinstance(node, (Term, Range)):
        out.append(places[id(node)])
    elif isinstance(node, Not):
        _postfix(node.child, places, out)
        out.append(NOT)
    else:
        op = AND if isinstance(node, And) else OR
        for n, child in enumerate(node.children):
            _postfix(child, places, out)
            if n:
                out.append(op)


def compile(tree: Node) -> Plan | None:
    """The plan of a query, or None when no index can answer it (`UNINDEXED`)."""
    seeks = drivers(tree)
    if seeks is None:
        return None
    terms = list(leaves(tree))
    places = {id(leaf): i for i, leaf in enumerate(terms)}
    program: list[int] = []
    _postfix(tree, places, program)
    seeking: dict[str, list[dict[str, Any]]] = {name: [] for name in SEEK_FIELDS}
    checked: dict[str, list[dict[str, Any]]] = {name: [] for name in CHECK_FIELDS}
    for place, leaf in enumerate(terms):
        (seeking if _among(leaf, seeks) else checked)[leaf.field].append(_term(place, leaf))
    return Plan(seeking, checked, program)
