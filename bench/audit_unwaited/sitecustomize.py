"""The service whose answers do not wait for their audit events, for the benchmark only.

Python imports `sitecustomize` from the first folder on its path that holds one, at the start of
every process: `python -m bench.defaults_ab`'s `audit-unwaited` variant puts this folder on the
service's PYTHONPATH, so the supervisor and each worker it starts hand a read's event to the
audit writer and answer at once, without waiting for its group commit. Every event is still
stored as before (the writer's batches, lanes and statements are the product's own; a write's
event is still part of the write's transaction): the CPU the trail costs stays, the wait goes.
It measures what any way of taking Neo4j's commit off the answer's path (a journal synced
before answering, moved into Neo4j behind it) could gain at most, less that journal's own
cost. Not fail-closed, so not a mode of the product: this folder is not part of the
distribution.
"""

from __future__ import annotations

import asyncio

from vaultgraph.services.audit_writer import CREATE as _CREATE
from vaultgraph.services.audit_writer import LINK as _LINK
from vaultgraph.services.audit_writer import AuditWriter as _Writer


def _consumed(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()  # nobody awaits it: a failed batch is not reported as unretrieved


async def _record(self, event, arrival=None, *, stored=None, within=None):
    future = asyncio.get_running_loop().create_future()
    future.add_done_callback(_consumed)
    self._enqueue((event, future, _CREATE if stored is None else _LINK, stored), arrival)


_Writer.record = _record
