"""What the service sends Neo4j: every statement's text and its parameters' types, recorded at
the driver's edge (sessions, transactions and `execute_query`), for tests that check which
statements a phase of the service sent (the start-up warm-up, a use case)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import neo4j
from neo4j._async.work.transaction import AsyncTransactionBase

from vaultgraph.repository.warmup import signature


@dataclass
class Sent:
    text: str
    types: tuple[tuple[str, str], ...]


@dataclass
class Recorder:
    sent: list[Sent] = field(default_factory=list)

    def note(self, query: Any, params: dict[str, Any] | None) -> None:
        text = query.text if isinstance(query, neo4j.Query) else str(query)
        self.sent.append(Sent(text, signature(params or {})))

    def mark(self) -> int:
        return len(self.sent)

    def since(self, mark: int) -> list[Sent]:
        return self.sent[mark:]


@contextlib.contextmanager
def recording() -> Iterator[Recorder]:
    """Record every statement this process sends while inside (all drivers)."""
    recorder = Recorder()
    session_run, tx_run = neo4j.AsyncSession.run, AsyncTransactionBase.run
    execute_query = neo4j.AsyncDriver.execute_query

    async def on_session(self, query, parameters=None, **kwargs):
        recorder.note(query, {**(parameters or {}), **kwargs})
        return await session_run(self, query, parameters, **kwargs)

    async def on_tx(self, query, parameters=None, **kwargs):
        recorder.note(query, {**(parameters or {}), **kwargs})
        return await tx_run(self, query, parameters, **kwargs)

    async def on_execute(self, query_, parameters_=None, **kwargs):
        recorder.note(query_, {**(parameters_ or {}),
                               **{k: v for k, v in kwargs.items() if not k.endswith("_")}})
        return await execute_query(self, query_, parameters_, **kwargs)

    neo4j.AsyncSession.run, AsyncTransactionBase.run = on_session, on_tx
    neo4j.AsyncDriver.execute_query = on_execute
    try:
        yield recorder
    finally:
        neo4j.AsyncSession.run, AsyncTransactionBase.run = session_run, tx_run
        neo4j.AsyncDriver.execute_query = execute_query
