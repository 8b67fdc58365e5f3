"""Expired tokens, deleted in batches as DELETE deletes them (cypher/expiry/sweep.cypher)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .audit import event_of
from .database import Database


@dataclass(frozen=True, slots=True)
class SweepResult:
    swept: int  # tokens turned into audit references
    failed: int  # batches skipped (found again by the next pass)
    # One pending audit event per swept token, committed with its deletion, to be chained.
    events: list[dict[str, Any]] = field(default_factory=list)


class ExpiryRepository:
    def __init__(self, db: Database):
        self._db = db

    async def sweep(self, *, batch: int, actor: str, reason: str,
                    event: dict[str, Any]) -> SweepResult:
        """`event`: the fields every swept token's audit event shares (application_id,
        operation, trace_id)."""
        records = await self._db.run_autocommit("expiry/sweep", batch=max(1, batch),
                                                actor=actor, reason=reason, event=event)
        events = [event_of(r["event"]) for r in records if r["event"] is not None]
        failed = {r["batch"] for r in records if r["committed"] is False}
        return SweepResult(len(events), len(failed), events)
