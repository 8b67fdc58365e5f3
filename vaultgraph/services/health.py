"""Readiness: Neo4j answers and the schema is in place."""

from __future__ import annotations

from ..repository.database import Database


class Readiness:
    def __init__(self, db: Database):
        self._db = db

    async def check(self) -> None:
        """Returns when ready; raises `errors.Unavailable` otherwise."""
        await self._db.ping()
