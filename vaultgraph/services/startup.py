"""Start-up work that needs Neo4j, in the background so the process listens at once: apply the
schema, check the key-encryption key against the stored tenant keys, warm the pool. Until it is
done `/ready` answers 503; while Neo4j is down it retries with backoff."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ..errors import Unavailable, WrongKey
from ..repository.database import Database
from .health import Readiness
from .tenants import TenantService

log = logging.getLogger("vaultgraph.startup")


class Startup:
    def __init__(self, db: Database, readiness: Readiness, tenants: TenantService | None,
                 warm: int, max_pause: float = 0.5,
                 prepare: Callable[[], Awaitable[None]] | None = None):
        self._db = db
        self._prepare = prepare
        self._readiness = readiness
        self._tenants = tenants
        self._warm = warm
        self._max_pause = max_pause

    async def run(self) -> None:
        """Returns once ready; raises `WrongKey` (the process must not serve)."""
        pause = 0.1
        while True:
            try:
                await self._db.apply_schema()
                if self._tenants is not None:
                    await self._tenants.verify_key_ring()
                await self._db.warm(self._warm)
            except WrongKey:
                raise
            except Unavailable:
                await asyncio.sleep(pause)
                pause = min(pause * 2, self._max_pause)
                continue
            self._readiness.started = True
            log.info("ready")
            await self._prepared()
            return

    async def _prepared(self) -> None:
        """Statements planned ahead, once the service is ready (the search statement: seconds
        of Neo4j's planning, longer on a cold or busy server, which the first search would
        wait for otherwise; readiness does not wait for it). A failure costs only that wait:
        logged."""
        if self._prepare is None:
            return
        try:
            await self._prepare()
        except Exception as exc:
            log.warning("search statement not planned ahead",
                        extra={"error": type(exc).__name__})
