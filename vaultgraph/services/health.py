"""Readiness: Neo4j answers, the schema is in place, and the process is not shutting down."""

from __future__ import annotations

import asyncio

from ..errors import Unavailable
from ..repository.database import Database

STARTING = "The service is starting."


def starting() -> Unavailable:
    return Unavailable(STARTING, retry_after=1)


class Readiness:
    def __init__(self, db: Database):
        self._db = db
        self.draining = False
        self._started = asyncio.Event()
        self.started = True  # False while the background start-up (services/startup.py) runs

    @property
    def started(self) -> bool:
        return self._started.is_set()

    @started.setter
    def started(self, value: bool) -> None:
        if value:
            self._started.set()
        else:
            self._started.clear()

    async def wait_started(self, within: float) -> bool:
        """Whether start-up is done, waiting for it up to `within` seconds."""
        if self._started.is_set():
            return True
        try:
            async with asyncio.timeout(within):
                await self._started.wait()
        except TimeoutError:
            return False
        return True

    def drain(self) -> None:
        """From now on the process answers not ready: it is shutting down (SIGTERM)."""
        self.draining = True

    async def check(self) -> None:
        """Returns when ready; raises `errors.Unavailable` otherwise."""
        if self.draining:
            raise Unavailable("The service is shutting down.", retry_after=1)
        if not self.started:
            raise starting()
        await self._db.ping()
