"""One `vaultgraph keys rotate` at a time against a database (docs/operations.md, "Command line").

The lock lives in Neo4j, the store every rotation re-wraps, and not in a file: a key file may be
a read-only mount (a container secret) and each replica or container may have its own copy and
its own home, while they all share the database. It is a write lock on one node, taken by a
statement in a transaction that stays open, with no timeout, until the rotation ends; a second
rotation's statement waits on it. A rotation that dies loses its connection, Neo4j rolls its
transaction back, and the lock is free: nothing stale to clear.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable

import neo4j

from .database import Database
from .neo4j_errors import map_errors

QUIET_WAIT = 1.0  # seconds a rotation waits for the lock before asking who holds it


@contextlib.asynccontextmanager
async def rotation_lock(db: Database, on_wait: Callable[[list[str]], None]) -> AsyncIterator[None]:
    """Hold the rotation lock for the block. When it is not taken within `QUIET_WAIT` and
    another rotation has a transaction open, `on_wait(holders)` is called once with the host
    and process id of each; then this one waits for them to end."""
    me = f"{socket.gethostname()} pid {os.getpid()}"
    async with map_errors(), db.session(neo4j.WRITE_ACCESS) as session:
        # timeout=0: no transaction timeout (db.transaction.timeout would end the lock early).
        tx = await session.begin_transaction(
            timeout=0, metadata={"vaultgraph": "keys rotate", "by": me})
        try:
            taking = asyncio.ensure_future(_take(tx, db))
            try:
                await asyncio.wait_for(asyncio.shield(taking), QUIET_WAIT)
            except TimeoutError:
                holders = await _holders(db, me)
                if holders:  # otherwise Neo4j is only slow to answer
                    on_wait(holders)
                await taking
            yield
        finally:
            await tx.close()  # rolled back: nothing of the rotation is kept on the node


async def _take(tx: neo4j.AsyncTransaction, db: Database) -> None:
    await (await tx.run(db.catalog.text("tenants/kek_rotation_lock"))).consume()


async def _holders(db: Database, me: str) -> list[str]:
    records = await db.read("tenants/kek_rotation_holders", by=me)
    return sorted(records[0]["holders"]) if records else []
