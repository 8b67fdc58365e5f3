"""Search in Neo4j: one statement, `search/page`, whose text is the same for every query.

The query arrives as one map parameter (search/plan.py `Plan`): the terms that drive it, the
terms checked on what they find, and its boolean tree in postfix. So Neo4j plans the statement
once, and a caller cannot make it plan again by sending new query shapes. One round trip a
page. `prepare` has Neo4j plan it at start-up, so the first search need not wait for it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import neo4j

from ..search.plan import STATEMENT, Plan, compile
from ..search.query import Term
from ..tokens.stored import StoredToken
from .database import Database
from .records import one_list


@dataclass(frozen=True, slots=True)
class Hit:
    token: StoredToken
    position: str  # created_at as Neo4j prints it (full precision): the cursor's first half


def _parameters(*, tenant_id: str, prefixes: list[str], plan: Plan,
                after: tuple[str, str] | None, limit: int) -> dict[str, Any]:
    # The cursor is a map on the first page too: null and text are two types to Neo4j's plan
    # cache, a map is one.
    return {"tenant_id": tenant_id, "prefixes": prefixes, "limit": limit,
            "query": plan.parameter(),
            "after": {"at": after[0], "id": after[1]} if after else {"at": None, "id": None}}


class SearchRepository:
    def __init__(self, db: Database):
        self._db = db

    async def page(self, *, tenant_id: str, prefixes: list[str], plan: Plan,
                   after: tuple[str, str] | None, limit: int) -> list[Hit]:
        """Up to `limit` visible matches after the cursor, newest first (one round trip)."""
        records = await self._db.read(STATEMENT, **_parameters(
            tenant_id=tenant_id, prefixes=prefixes, plan=plan, after=after, limit=limit))
        # The token's created_at comes as Neo4j prints it (@token): full precision, the cursor.
        return [Hit(StoredToken.from_properties(t), t["created_at"])
                for t in one_list(records, "tokens")]

    async def prepare(self) -> None:
        """Have Neo4j plan the statement now: `EXPLAIN` plans and caches it without running
        it. Neo4j keeps a plan per parameter type and per size class of a list or a string
        (exactly 1, up to 10, up to 100, ...), so this plans it for a tenant id as the service
        makes them and for callers with one, and with a few, container prefixes."""
        plan = compile(Term("id", "-"))
        assert plan is not None
        db = self._db
        for prefixes in (["/"], ["/a/", "/b/"]):
            params = _parameters(tenant_id=str(uuid.uuid4()), prefixes=prefixes, plan=plan,
                                 after=None, limit=21)
            await db.driver.execute_query(neo4j.Query("EXPLAIN " + db.catalog.text(STATEMENT)),
                                          params, database_=db.database,
                                          routing_=neo4j.RoutingControl.READ)
