"""Token graph statements: one method per file in cypher/graph/."""

from __future__ import annotations

from dataclasses import dataclass

from ..tokens.stored import StoredToken
from .database import Database


@dataclass(frozen=True)
class Link:
    created: bool  # False: the link was already there
    created_at: str  # Neo4j's ISO 8601 text of the time (`tokens.fields.format_stored`)


@dataclass(frozen=True)
class Subgraph:
    tokens: list[StoredToken]  # the root first, then breadth first
    links: list[tuple[str, str]]  # (parent_id, child_id)
    truncated: bool


class GraphRepository:
    def __init__(self, db: Database):
        self._db = db

    async def link(self, *, tenant_id: str, parent_id: str, child_id: str,
                   prefixes: list[str], actor: str | None = None) -> Link | None:
        """The link parent → child (made if missing); None when either end is not visible."""
        records = await self._db.write("graph/link", tenant_id=tenant_id, parent_id=parent_id,
                                      child_id=child_id, prefixes=prefixes, actor=actor)
        if not records:
            return None
        return Link(records[0]["created"], records[0]["created_at"])

    async def unlink(self, *, tenant_id: str, parent_id: str, child_id: str,
                     prefixes: list[str], actor: str | None = None) -> bool | None:
        """Whether a link was removed; None when either end is not visible."""
        records = await self._db.write("graph/unlink", tenant_id=tenant_id, parent_id=parent_id,
                                      child_id=child_id, prefixes=prefixes, actor=actor)
        return records[0]["removed"] if records else None

    async def children(self, *, tenant_id: str, id: str, prefixes: list[str], after: str,
                       limit: int, ids: list[str] | None,
                       types: list[str] | None) -> list[StoredToken] | None:
        """A page of a visible token's visible children in id order; None when the token
        itself is not visible."""
        return await self._neighbours("graph/list_children", tenant_id, id, prefixes, after,
                                      limit, ids, types)

    async def parents(self, *, tenant_id: str, id: str, prefixes: list[str], after: str,
                      limit: int, ids: list[str] | None,
                      types: list[str] | None) -> list[StoredToken] | None:
        """The mirror of `children`."""
        return await self._neighbours("graph/list_parents", tenant_id, id, prefixes, after,
                                      limit, ids, types)

    async def _neighbours(self, statement: str, tenant_id: str, id: str, prefixes: list[str],
                          after: str, limit: int, ids: list[str] | None,
                          types: list[str] | None) -> list[StoredToken] | None:
        records = await self._db.read(
            statement, tenant_id=tenant_id, id=id, prefixes=prefixes, after=after,
            limit=limit, ids=ids, types=types)
        if not records:
            return None
        return [StoredToken.from_properties(t) for t in records[0]["tokens"]]

    async def traverse(self, *, tenant_id: str, id: str, prefixes: list[str], depth: int,
                       direction: str, max_nodes: int, max_links: int) -> Subgraph | None:
        records = await self._db.read(
            "graph/traverse", tenant_id=tenant_id, id=id, prefixes=prefixes, depth=depth,
            direction=direction, max_nodes=max_nodes, max_links=max_links)
        if not records:
            return None
        rec = records[0]
        return Subgraph([StoredToken.from_properties(t) for t in rec["tokens"]],
                        [(e["parent_id"], e["child_id"]) for e in rec["links"]],
                        rec["truncated"])
