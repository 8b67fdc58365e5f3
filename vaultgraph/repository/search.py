"""Search in Neo4j: the one statement that is composed, and only from static fragments.

`search/frame` holds the statement's frame; each seek (`search/seek_<field>`) and check
(`search/match_<field>`), and the joins (`search/union`, `and`, `or`, `not`, `group`, `true`),
is a file of its own. The query's tree picks fragments by its shape; each term's values travel
as `$t<i>_value` (or `_low`, `_high`, …), where `<i>` is the term's place in the query. So the
statement text depends only on the tree's shape, never on a character the caller typed, and is
built once per shape.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import neo4j

from ..catalog import Catalog
from ..search.query import And, Leaf, Node, Not, Range, Term, leaves
from ..tokens.stored import StoredToken
from .database import Database
from .records import one_list

_PLACEHOLDER = re.compile(r"\$(value|low_inclusive|high_inclusive|low|high)\b")
_SHAPES_KEPT = 512
# Per field, its seek (None: it cannot drive a query) and its check, by catalog name (written
# out, so the catalog test sees each file used).
FRAGMENTS: dict[str, tuple[str | None, str]] = {
    "id": ("search/seek_id", "search/match_id"),
    "type": ("search/seek_type", "search/match_type"),
    "container": (None, "search/match_container"),
    "fingerprint": ("search/seek_fingerprint", "search/match_fingerprint"),
    "metadata": ("search/seek_metadata", "search/match_metadata"),
    "data": ("search/seek_data", "search/match_data"),
    "created_at": ("search/seek_created_at", "search/match_created_at"),
    "expires_at": ("search/seek_expires_at", "search/match_expires_at"),
    "parent": ("search/seek_parent", "search/match_parent"),
    "child": ("search/seek_child", "search/match_child"),
    "ancestor": ("search/seek_ancestor", "search/match_ancestor"),
    "descendant": ("search/seek_descendant", "search/match_descendant"),
}
FRAME, UNION, AND, OR, NOT, GROUP, TRUE = (
    "search/frame", "search/union", "search/and", "search/or", "search/not", "search/group",
    "search/true")


@dataclass(frozen=True, slots=True)
class Hit:
    token: StoredToken
    position: str  # created_at as Neo4j prints it (full precision): the cursor's first half


class SearchStatements:
    """Composes (and caches, by shape) the statement for a tree, its seeks and its check."""

    def __init__(self, catalog: Catalog):
        self._fragments = {
            name: "\n".join(line for line in catalog.text(name).splitlines()
                            if not line.lstrip().startswith("//")).strip()
            for name in (*(n for pair in FRAGMENTS.values() for n in pair if n), FRAME, UNION,
                         AND, OR, NOT, GROUP, TRUE)}
        self._cache: OrderedDict[tuple, neo4j.Query] = OrderedDict()

    def compose(self, tree: Node, seeks: tuple[Leaf, ...],
                check: Node | None) -> tuple[neo4j.Query, dict[str, Any]]:
        """The statement and the terms' parameters."""
        places = {id(leaf): i for i, leaf in enumerate(leaves(tree))}
        params: dict[str, Any] = {}
        for leaf in leaves(tree):
            i = places[id(leaf)]
            if isinstance(leaf, Term):
                params[f"t{i}_value"] = leaf.value
            else:
                params.update({f"t{i}_low": leaf.low, f"t{i}_high": leaf.high,
                               f"t{i}_low_inclusive": leaf.low_inclusive,
                               f"t{i}_high_inclusive": leaf.high_inclusive})
        seek_shape = tuple((leaf.field, places[id(leaf)]) for leaf in seeks)
        check_shape = self._shape(check, places)
        key = (seek_shape, check_shape)
        query = self._cache.get(key)
        if query is None:
            query = neo4j.Query(self._text(seek_shape, check, places))
            self._cache[key] = query
            if len(self._cache) > _SHAPES_KEPT:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return query, params

    def _shape(self, node: Node | None, places: dict[int, int]) -> tuple:
        if node is None:
            return ()
        if isinstance(node, (Term, Range)):
            return (node.field, places[id(node)])
        if isinstance(node, Not):
            return ("not", self._shape(node.child, places))
        kind = "and" if isinstance(node, And) else "or"
        return (kind, *(self._shape(c, places) for c in node.children))

    def _fragment(self, name: str, place: int | None = None) -> str:
        text = self._fragments[name]
        if place is None:
            return text
        return _PLACEHOLDER.sub(lambda m: f"$t{place}_{m.group(1)}", text)

    def _check(self, node: Node, places: dict[int, int]) -> str:
        if isinstance(node, (Term, Range)):
            inner = self._fragment(FRAGMENTS[node.field][1], places[id(node)])
        elif isinstance(node, Not):
            inner = self._fragment(NOT) + " " + self._check(node.child, places)
        else:
            join = self._fragment(AND if isinstance(node, And) else OR)
            inner = f"\n{join} ".join(self._check(c, places) for c in node.children)
        return self._fragment(GROUP).replace("{{inner}}", inner)

    def _text(self, seek_shape: tuple, check: Node | None, places: dict[int, int]) -> str:
        union = "\n" + self._fragment(UNION) + "\n"
        seeks = union.join(self._fragment(FRAGMENTS[name][0] or "", place)
                           for name, place in seek_shape)
        where = self._fragment(TRUE) if check is None else self._check(check, places)
        return (self._fragment(FRAME).replace("{{seeks}}", seeks)
                .replace("{{check}}", where))


class SearchRepository:
    def __init__(self, db: Database):
        self._db = db
        self.statements = SearchStatements(db.catalog)

    async def page(self, *, tenant_id: str, prefixes: list[str], tree: Node,
                   seeks: tuple[Leaf, ...], check: Node | None,
                   after: tuple[str, str] | None, limit: int) -> list[Hit]:
        """Up to `limit` visible matches after the cursor, newest first (one round trip)."""
        query, params = self.statements.compose(tree, seeks, check)
        records = await self._db.read_composed(
            query, tenant_id=tenant_id, prefixes=prefixes, limit=limit,
            after_at=after[0] if after else None, after_id=after[1] if after else None,
            **params)
        # The token's created_at comes as Neo4j prints it (@token): full precision, the cursor.
        return [Hit(StoredToken.from_properties(t), t["created_at"])
                for t in one_list(records, "tokens")]
