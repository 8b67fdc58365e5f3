"""Search in Neo4j: one statement, `search/page`, whose text is the same for every query.

The query arrives as parameters (search/plan.py `Plan`): the terms that drive it, the terms
checked on what they find, and its boolean tree in postfix. So Neo4j plans the statement once,
and a caller cannot make it plan again by sending new query shapes. One round trip a page.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..search.plan import STATEMENT, Plan
from ..tokens.stored import StoredToken
from .database import Database, one_list


@dataclass(frozen=True, slots=True)
class Hit:
    token: StoredToken
    position: str  # created_at as Neo4j prints it (full precision): the cursor's first half


class SearchRepository:
    def __init__(self, db: Database):
        self._db = db

    async def page(self, *, tenant_id: str, prefixes: list[str], plan: Plan,
                   after: tuple[str, str] | None, limit: int) -> list[Hit]:
        """Up to `limit` visible matches after the cursor, newest first (one round trip)."""
        records = await self._db.read(
            STATEMENT, tenant_id=tenant_id, prefixes=prefixes, limit=limit,
            query=plan.parameter(),
            after={"at": after[0], "id": after[1]} if after else {"at": None, "id": None})
        # The token's created_at comes as Neo4j prints it (@token): full precision, the cursor.
        return [Hit(StoredToken.from_properties(t), t["created_at"])
                for t in one_list(records, "tokens")]
