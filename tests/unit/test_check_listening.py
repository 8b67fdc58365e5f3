"""`Database.check_listening`: a command fails at once where nothing listens at Neo4j's address,
and leaves a server that accepted but is slow to answer to its statements, which wait and retry
as before (no Neo4j needed: local sockets stand in for both)."""

from __future__ import annotations

import socket

import pytest

from vaultgraph.errors import Unavailable
from vaultgraph.repository.database import Database


def connect(uri: str) -> Database:
    return Database.connect(uri, "neo4j", "not-used", None, "neo4j",  # type: ignore[arg-type]
                            acquire_timeout=0.5, connect_timeout=0.5)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("uri", [
    f"bolt://127.0.0.1:{closed_port()}", f"neo4j://127.0.0.1:{closed_port()}",
    "neo4j://no-such-host.invalid:7687"], ids=["bolt refused", "neo4j refused", "unknown name"])
async def test_nothing_listening_is_unavailable_at_once(uri):
    db = connect(uri)
    try:
        with pytest.raises(Unavailable):
            await db.check_listening()
    finally:
        await db.close()


@pytest.mark.parametrize("scheme", ["bolt", "neo4j"])
async def test_a_server_slow_to_answer_is_left_to_the_statements(scheme):
    """It accepts the connection and never answers: the check times out and raises nothing,
    so the first statement waits for it (and the driver retries it) as before."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        db = connect(f"{scheme}://127.0.0.1:{silent.getsockname()[1]}")
        try:
            await db.check_listening()
        finally:
            await db.close()
