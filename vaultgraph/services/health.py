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

    def __setattr__(self, name: str, value) -> None:
        # `started` stays a plain attribute, read by every request (api/middleware.py); setting
        # it, once or twice a process, also moves the event `wait_started` waits on.
        object.__setattr__(self, name, value)
        if name == "started":
            if value:
                self._started.set()
            elif not self.draining:
                self._started.clear()

    async def wait_started(self, within: float) -> bool:
        """Whether start-up is done, waiting for it up to `within` seconds; False at once when
        the process starts to drain meanwhile (its start-up will not finish)."""
        if not self._started.is_set():
            try:
                async with asyncio.timeout(within):
                    await self._started.wait()
            except TimeoutError:
                return False
        return self.started

    def drain(self) -> None:
        """From now on the process answers not ready: it is shutting down (SIGTERM). Requests
        waiting for start-up stop waiting."""
        self.draining = True
        self._started.set()

    def not_serving(self) -> Unavailable:
        """Why a request is not served: shutting down, or still starting."""
        if self.draining:
            return Unavailable("The service is shutting down.", retry_after=1)
        return starting()

    async def check(self) -> None:
        """Returns when ready; raises `errors.Unavailable` otherwise."""
        if self.draining or not self.started:
            raise self.not_serving()
        await self._db.ping()
