"""Expired tokens, deleted in batches as DELETE deletes them (cypher/expiry/sweep.cypher)."""

from __future__ import annotations

from dataclasses import dataclass

from .database import Database


@dataclass(frozen=True, slots=True)
class SweepResult:
    swept: int  # tokens turned into audit references
    failed: int  # batches skipped (found again by the next pass)


class ExpiryRepository:
    def __init__(self, db: Database):
        self._db = db

    async def sweep(self, *, batch: int, actor: str, reason: str) -> SweepResult:
        records = await self._db.run_autocommit("expiry/sweep", batch=max(1, batch),
                                                actor=actor, reason=reason)
        return SweepResult(records[0]["swept"], records[0]["failed"])

    async def sweep_idempotency(self, *, batch: int) -> SweepResult:
        """Idempotency entries past their expiry, deleted in batches."""
        records = await self._db.run_autocommit("expiry/sweep_idempotency", batch=max(1, batch))
        return SweepResult(records[0]["swept"], records[0]["failed"])
