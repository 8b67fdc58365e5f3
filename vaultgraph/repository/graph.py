"""Token graph statements: one method per file in cypher/graph/."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..db import Database


@dataclass(frozen=True)
class Link:
    created: bool  # False: the link was already there
    created_at: datetime


@dataclass(frozen=True)
class Subgraph:
    tokens: list[dict]  # the root first, then breadth first
    links: list[tuple[str, str]]  # (parent_id, child_id)
    truncated: bool


class GraphRepository:
    def __init__(self, db: Database):
        self.db = db

    async def link(self, *, tenant_id: str, parent_id: str, child_id: str,
                   prefixes: list[str]) -> Link | None:
        """The link parent → child (made if missing); None when either end is not visible."""
        records = await self.db.write("graph/link", tenant_id=tenant_id, parent_id=parent_id,
                                      child_id=child_id, prefixes=prefixes)
        if not records:
            return None
        return Link(records[0]["created"], records[0]["created_at"].to_native())

    async def unlink(self, *, tenant_id: str, parent_id: str, child_id: str,
                     prefixes: list[str]) -> bool | None:
        """Whether a link was removed; None when either end is not visible."""
        records = await self.db.write("graph/unlink", tenant_id=tenant_id, parent_id=parent_id,
                                      child_id=child_id, prefixes=prefixes)
        return records[0]["removed"] if records else None

    async def neighbours(self, statement: str, *, tenant_id: str, id: str, prefixes: list[str],
                         after: str, limit: int, ids: list[str] | None,
                         types: list[str] | None) -> list[dict] | None:
        """A page of children or parents (`statement`: graph/list_children or
        graph/list_parents) in id order; None when the token itself is not visible."""
        records = await self.db.read(
            statement, tenant_id=tenant_id, id=id, prefixes=prefixes, after=after,
            limit=limit, ids=ids, types=types)
        return records[0]["tokens"] if records else None

    async def traverse(self, *, tenant_id: str, id: str, prefixes: list[str], depth: int,
                       direction: str, max_nodes: int, max_links: int) -> Subgraph | None:
        records = await self.db.read(
            "graph/traverse", tenant_id=tenant_id, id=id, prefixes=prefixes, depth=depth,
            direction=direction, max_nodes=max_nodes, max_links=max_links)
        if not records:
            return None
        rec = records[0]
        return Subgraph(rec["tokens"], [(e["parent_id"], e["child_id"]) for e in rec["links"]],
                        rec["truncated"])
