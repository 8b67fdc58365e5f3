"""Start-up work that needs Neo4j, in the background so the process listens at once: apply the
schema, check the key-encryption key against the stored tenant keys, open the pool's
connections, have Neo4j plan every catalog statement and the search statement (the search
statement's planning, seconds on a cold server, meanwhile), and run the write path once in a
committed transaction whose writes are then removed (repository/warmup.py), so the first
requests after a (re)start cost what later ones do, and open the audit writer's chain of write
events. Until it is done `/ready` answers 503;
while Neo4j is down it retries with backoff. The log's "ready" line says how long it took."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from ..errors import Unavailable, WrongKey
from ..repository.database import Database
from ..repository.warmup import Prepared, prepare, rehearse
from .audit_writer import AuditWriter
from .health import Readiness
from .tenants import TenantService

log = logging.getLogger("vaultgraph.startup")


class Startup:
    def __init__(self, db: Database, readiness: Readiness, tenants: TenantService | None,
                 warm: int, max_pause: float = 0.5,
                 prepare: Callable[[], Awaitable[None]] | None = None,
                 writer: AuditWriter | None = None):
        self._db = db
        self._writer = writer
        self._prepare = prepare
        self._readiness = readiness
        self._tenants = tenants
        self._warm = warm
        self._max_pause = max_pause
        self.prepared: Prepared | None = None  # what the warm-up planned, once ready

    async def run(self) -> None:
        """Returns once ready; raises `WrongKey` (the process must not serve)."""
        pause = 0.1
        started = time.perf_counter()
        search: asyncio.Task[float | None] | None = None
        try:
            while True:
                try:
                    await self._db.apply_schema()
                    if self._tenants is not None:
                        await self._tenants.verify_key_ring()
                    await self._db.warm(self._warm)
                    began = time.perf_counter()
                    # The search statement is planned while the catalog's statements are, and
                    # the write path rehearsed: one plan that takes seconds, on its own
                    # connection. Started once: a retry of the rest does not plan it again.
                    if search is None or (search.done() and search.result() is None):
                        search = asyncio.create_task(self._prepared())
                    prepared = await prepare(self._db,
                                             concurrency=max(1, min(self._warm, 4)))
                    planned = time.perf_counter()
                    await self._rehearse(prepared)
                    if self._writer is not None:  # creates' events placed from the first on
                        await self._writer.open_writes()
                    rehearsed = time.perf_counter()
                    search_ms = await search
                    self.prepared = prepared
                except WrongKey:
                    raise
                except Unavailable:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, self._max_pause)
                    continue
                break
        finally:
            if search is not None and not search.done():
                search.cancel()
        self._readiness.started = True
        now = time.perf_counter()
        log.info("ready", extra={
            "ms": round((now - started) * 1000, 1),
            "statements_prepared": prepared.statements,
            "prepare_ms": round((planned - began) * 1000, 1),
            "writes_rehearsed": len(prepared.rehearsed),
            "rehearse_ms": round((rehearsed - planned) * 1000, 1),
            "search_prepare_ms": search_ms})

    async def _rehearse(self, prepared: Prepared) -> None:
        """The write path once, committed and removed (repository/warmup.py, `rehearse`).
        Neo4j being unavailable is retried as the rest of start-up is; any other failure costs
        only the first writes' wait, as before: logged, and the service is ready all the same."""
        try:
            await rehearse(self._db, prepared)
        except (Unavailable, WrongKey):
            raise
        except Exception as exc:
            log.warning("write path not rehearsed", extra={
                "error": type(exc).__name__, "rehearsed": len(prepared.rehearsed)})

    async def _prepared(self) -> float | None:
        """The search statement planned ahead (seconds of Neo4j's planning, longer on a cold
        or busy server, which the first search would wait for otherwise), before the service
        says it is ready. Its milliseconds, or None when it failed: that costs only the first
        search the wait, so it is logged and readiness goes on."""
        if self._prepare is None:
            return None
        began = time.perf_counter()
        try:
            await self._prepare()
        except Exception as exc:
            log.warning("search statement not planned ahead",
                        extra={"error": type(exc).__name__})
            return None
        return round((time.perf_counter() - began) * 1000, 1)
