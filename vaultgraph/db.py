"""The Neo4j edge: one driver per process, named catalog statements, driver errors mapped.

A request's single statement runs as an auto-commit transaction: RUN and PULL go out together,
so it costs one Bolt round trip (a managed transaction adds BEGIN and a COMMIT round trip, which
measured at half the throughput here). Reads are routed as reads. A statement that fails with a
transient error (deadlock, lock timeout) was rolled back and is retried here; several
statements that must commit together run in a managed transaction (`write_tx`), which the
driver retries, so its work function is idempotent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import neo4j
from neo4j import AsyncDriver, AsyncManagedTransaction
from neo4j.exceptions import (
    ConstraintError,
    DriverError,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
    TransientError,
)

from . import problems
from .catalog import Catalog

log = logging.getLogger(__name__)
T = TypeVar("T")

UNAVAILABLE = (ServiceUnavailable, SessionExpired)
TRANSIENT_RETRIES = 5


class UniquenessViolation(Exception):
    """A uniqueness constraint refused a write (e.g. an id already taken)."""


class Database:
    def __init__(self, driver: AsyncDriver, catalog: Catalog, database: str):
        self.driver = driver
        self.catalog = catalog
        self.database = database
        self.schema_applied = False

    @classmethod
    def connect(cls, uri: str, user: str, password: str, catalog: Catalog, database: str,
                pool_size: int = 100) -> Database:
        driver = neo4j.AsyncGraphDatabase.driver(
            uri, auth=(user, password), max_connection_pool_size=pool_size,
            connection_acquisition_timeout=10.0, connection_timeout=5.0,
            max_transaction_retry_time=10.0,
            # Planner notifications (e.g. "property does not exist yet") are for development;
            # the server need not compute or send them.
            notifications_min_severity="OFF",
        )
        return cls(driver, catalog, database)

    async def close(self) -> None:
        await self.driver.close()

    async def read(self, name: str, /, **params: Any) -> list[neo4j.Record]:
        return await self._statement(name, params, neo4j.READ_ACCESS)

    async def write(self, name: str, /, **params: Any) -> list[neo4j.Record]:
        return await self._statement(name, params, neo4j.WRITE_ACCESS)

    async def _statement(self, name: str, params: dict, mode: str) -> list[neo4j.Record]:
        query = self.catalog[name]
        async with map_errors():
            for attempt in range(TRANSIENT_RETRIES):
                try:
                    async with self.driver.session(database=self.database,
                                                   default_access_mode=mode) as session:
                        result = await session.run(query, params)
                        return [record async for record in result]
                except TransientError:
                    if attempt == TRANSIENT_RETRIES - 1:
                        raise
                    await asyncio.sleep(0.01 * 2**attempt)
        raise AssertionError("unreachable")

    async def write_tx(self, work: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T:
        """Several statements in one managed write transaction (one commit)."""
        async with map_errors(), self.driver.session(database=self.database) as session:
            return await session.execute_write(work)

    async def run(self, tx: AsyncManagedTransaction, name: str, /, **params: Any) -> list:
        result = await tx.run(self.catalog.text(name), params)
        return [record async for record in result]

    async def run_autocommit(self, name: str, /, **params: Any) -> list[neo4j.Record]:
        """One auto-commit write statement, never retried by the driver.

        For statements that manage their own transactions (`CALL { … } IN TRANSACTIONS`), which
        Neo4j refuses inside an explicit or managed transaction.
        """
        async with map_errors(), self.driver.session(database=self.database) as session:
            result = await session.run(self.catalog[name], params)
            return [record async for record in result]

    async def ping(self) -> None:
        """One auto-commit read, never retried: readiness must answer fast when Neo4j is down."""
        async with map_errors(), self.driver.session(
                database=self.database, default_access_mode=neo4j.READ_ACCESS) as session:
            result = await session.run(self.catalog["health/ping"])
            await result.consume()
        if not self.schema_applied:
            await self.apply_schema()

    async def apply_schema(self) -> None:
        async with map_errors():
            for statement in self.catalog.schema_statements():
                await self.driver.execute_query(statement, database_=self.database)
        self.schema_applied = True


class map_errors:
    """Translate driver failures into problems at the repository edge."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb):
        if exc is None:
            return False
        if isinstance(exc, ConstraintError):
            raise UniquenessViolation() from exc
        if isinstance(exc, (*UNAVAILABLE, TransientError)) or (
                isinstance(exc, DriverError) and not isinstance(exc, Neo4jError)):
            log.warning("neo4j unavailable", extra={"error": type(exc).__name__})
            raise problems.ServiceUnavailable(
                "The database is unavailable; try again shortly.",
                headers={"Retry-After": "5"}) from exc
        return False
