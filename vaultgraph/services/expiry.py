"""Expiration: expired tokens are deleted as DELETE /tokens/{id} deletes them (gone for every
read, and within an hour of `expires_at`). The same pass deletes idempotency entries past their
expiry (docs/bulk-and-idempotency.md).

A token reads as 404 from the moment it expires; the sweeper then turns it into an audit
reference (`deleted_reason: "expired"`, `deleted_by: "expiry-sweeper"`, links removed) within
`expiry_sweep_interval` seconds, well inside the interface's one hour.

The periodic run and any on-demand call go through the same guarded `ExpirySweeper.sweep`, so
two sweeps never overlap in one process. Across processes the statement itself is safe to run
at once (cypher/expiry/sweep.cypher), so every replica may run a sweeper.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid

from .. import metrics
from ..audit.event import SYSTEM
from ..logging_setup import trace_id_var
from ..repository.expiry import ExpiryRepository
from .audit_writer import AuditWriter

log = logging.getLogger(__name__)

ACTOR = "expiry-sweeper"
REASON = "expired"
OPERATION = "token:delete"


class ExpirySweeper:
    """Runs `sweep` every `interval` seconds in the background (0 or less: on demand only)."""

    def __init__(self, repo: ExpiryRepository, *, interval: float, batch: int,
                 audit: AuditWriter | None = None):
        self._repo = repo
        self._audit = audit
        self._interval = interval
        self._batch = batch
        self._lock = asyncio.Lock()
        self._task: asyncio.Task | None = None
        self._stopping = asyncio.Event()

    @property
    def task(self) -> asyncio.Task | None:
        """The background task, once started (kept after `stop`, done by then)."""
        return self._task

    async def sweep(self) -> int:
        """One pass, after any pass already under way in this process has finished. Its log
        lines carry the trace id its audit events record (the log's `trace_id` field, as a
        request's)."""
        trace_id = uuid.uuid4().hex
        token = trace_id_var.set(trace_id)
        try:
            return await self._sweep(trace_id)
        finally:
            trace_id_var.reset(token)

    async def _sweep(self, trace_id: str) -> int:
        async with self._lock:
            started = time.perf_counter()
            swept = failed = 0
            try:
                while True:  # each statement takes a bounded share of the backlog
                    # Not cancelled mid-statement at shutdown (`stop`): a statement's deletions
                    # commit in Neo4j whether or not their answer is awaited, and their events
                    # are linked only from that answer.
                    result = await asyncio.shield(self._repo.sweep(
                        batch=self._batch, actor=ACTOR, reason=REASON,
                        event={"application_id": SYSTEM, "operation": OPERATION,
                               "trace_id": trace_id}))
                    # Each deletion's event committed with it; link them into this chain.
                    if self._audit is not None:
                        for stored in result.events:
                            event = {k: v for k, v in stored.items() if k != "pending"}
                            self._audit.record_later(event, stored=stored)
                    swept, failed = swept + result.swept, failed + result.failed
                    if result.complete or result.failed or self._stopping.is_set():
                        break  # stopping: the rest of the backlog is the next start's
                keys_swept = 0
                if not self._stopping.is_set():  # stopping: the entries wait for the next start
                    keys = await self._repo.sweep_idempotency(batch=self._batch)
                    keys_swept, failed = keys.swept, failed + keys.failed
            except Exception:
                metrics.SWEEPS.labels("error").inc()
                raise
            finally:
                metrics.SWEEP_DURATION.observe(time.perf_counter() - started)
                metrics.SWEPT.inc(swept)
                metrics.SWEEP_SKIPPED.inc(failed)
        metrics.SWEEPS.labels("ok").inc()
        if failed:
            # Skipped batches are left for the next pass, which finds the same tokens again.
            log.warning("expiry sweep skipped tokens until the next run",
                        extra={"failed": failed})
        log.info("expiry sweep", extra={
            "swept": swept, "idempotency_keys": keys_swept,
            "ms": round((time.perf_counter() - started) * 1000, 2)})
        return swept

    async def run(self) -> None:
        """Sweep every interval until stopped; a failed pass is logged and tried again."""
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._interval)
                return  # stopped while waiting
            try:
                await self.sweep()
            except Exception as exc:
                # Neo4j down, say: the next interval tries again. Type only: driver messages
                # may quote statement text.
                log.warning("expiry sweep failed; trying again at the next interval",
                            extra={"error": type(exc).__name__})

    def start(self) -> None:
        if self._interval > 0 and self._task is None:
            self._task = asyncio.create_task(self.run(), name="expiry-sweeper")

    async def stop(self, grace: float = 30.0) -> None:
        """End the background task: a pass under way finishes the statement it sent (whose
        deletions commit anyway) and hands its events to the audit writer, which is stopped
        after this; past `grace` seconds the task is cancelled."""
        self._stopping.set()
        if self._task is None or self._task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), grace)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
