"""Expired tokens, deleted in batches as DELETE deletes them (cypher/expiry/sweep.cypher)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .audit import event_of
from .database import Database

PASS_BATCHES = 5  # inner transactions per statement


@dataclass(frozen=True, slots=True)
class SweepResult:
    swept: int  # tokens turned into audit references
    failed: int  # batches skipped (found again by the next pass)
    # One pending audit event per swept token, committed with its deletion, to be chained.
    events: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = True  # fewer expired tokens were found than the statement may take


class ExpiryRepository:
    def __init__(self, db: Database):
        self._db = db

    async def sweep(self, *, batch: int, actor: str, reason: str, event: dict[str, Any],
                    limit: int | None = None) -> SweepResult:
        """At most `limit` tokens (default: 5 batches). `event`: the fields every swept token's
        audit event shares (application_id, operation, trace_id)."""
        batch = max(1, batch)
        records = await self._db.run_autocommit(
            "expiry/sweep", batch=batch, limit=limit or batch * PASS_BATCHES, actor=actor,
            reason=reason, event=event)
        events = [event_of(r["event"]) for r in records if r["event"] is not None]
        failed = {r["batch"] for r in records if r["committed"] is False}
        return SweepResult(len(events), len(failed), events,
                           complete=len(records) < (limit or batch * PASS_BATCHES))

    async def sweep_idempotency(self, *, batch: int) -> SweepResult:
        """Idempotency entries past their expiry, deleted in batches."""
        records = await self._db.run_autocommit("expiry/sweep_idempotency", batch=max(1, batch))
        return SweepResult(records[0]["swept"], records[0]["failed"])
