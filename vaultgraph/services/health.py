"""Readiness: Neo4j answers, the schema is in place, and the process is not shutting down."""

from __future__ import annotations

from ..errors import Unavailable
from ..repository.database import Database


class Readiness:
    def __init__(self, db: Database):
        self._db = db
        self.draining = False
        self.started = True  # False while the background start-up (services/startup.py) runs

    def drain(self) -> None:
        """From now on the process answers not ready: it is shutting down (SIGTERM)."""
        self.draining = True

    async def check(self) -> None:
        """Returns when ready; raises `errors.Unavailable` otherwise."""
        if self.draining:
            raise Unavailable("The service is shutting down.", retry_after=1)
        if not self.started:
            raise Unavailable("The service is starting.", retry_after=1)
        await self._db.ping()
