"""Idempotency entries in Neo4j (cypher/idempotency/): claim, complete, release.

These statements are bookkeeping of the HTTP exchange, not changes to tokens: they run without
the request's audit event (`Database.write_unaudited`); the request's own write carries it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UniquenessViolation
from .database import Database


@dataclass(frozen=True, slots=True)
class Claim:
    claimed: bool  # True: this request holds the key and runs
    # "pending" (in flight), "done" (answer kept) or "unanswered" (its write committed, its
    # answer was lost: never run again)
    state: str
    same_request: bool
    status: int | None
    content_type: str | None
    response_ct: str | None  # the kept response, encrypted; only for the same request
    # What the first request's audit event named: a replay's event names the same tokens.
    token_ids: list[str] | None = None
    transforms: str | None = None  # JSON {transform: count}
    rules: str | None = None  # digest of the caller's access rules when the answer was kept
    # A pending entry's: seconds since its request claimed it, and seconds its lease has left.
    age: float | None = None
    lease_left: float | None = None


class IdempotencyRepository:
    def __init__(self, db: Database):
        self._db = db

    async def claim(self, *, tenant_id: str, application_id: str, key: str, request_hash: str,
                    claim: str, ttl: float, lease: float) -> Claim:
        params = dict(tenant_id=tenant_id, application_id=application_id, key=key,
                      request_hash=request_hash, claim=claim, ttl=ttl, lease=lease)
        try:
            records = await self._db.write_unaudited("idempotency/claim", **params)
        except UniquenessViolation:
            # Two first claims met on the constraint: the loser reads the winner's entry.
            records = await self._db.write_unaudited("idempotency/claim", **params)
        r = records[0]
        return Claim(r["claimed"], r["state"], r["same_request"], r["status"],
                     r["content_type"], r["response_ct"], r["token_ids"], r["transforms"],
                     r["rules"], _seconds(r["age_ms"]), _seconds(r["lease_ms"]))

    async def complete(self, *, application_id: str, key: str, claim: str, status: int,
                       content_type: str | None, response_ct: str,
                       token_ids: list[str] | None = None, transforms: str | None = None,
                       rules: str | None = None) -> bool:
        records = await self._db.write_unaudited(
            "idempotency/complete", application_id=application_id, key=key, claim=claim,
            status=status, content_type=content_type, response_ct=response_ct,
            token_ids=token_ids, transforms=transforms, rules=rules)
        return bool(records)

    async def unanswered(self, *, application_id: str, key: str, claim: str,
                         token_ids: list[str]) -> None:
        await self._db.write_unaudited("idempotency/unanswered", application_id=application_id,
                                       key=key, claim=claim, token_ids=token_ids)

    async def unchanged(self, *, tenant_id: str, application_id: str, key: str) -> bool:
        records = await self._db.read("idempotency/unchanged", tenant_id=tenant_id,
                                      application_id=application_id, key=key)
        return bool(records and records[0]["unchanged"])

    async def release(self, *, application_id: str, key: str, claim: str) -> None:
        await self._db.write_unaudited("idempotency/release", application_id=application_id,
                                       key=key, claim=claim)


def _seconds(milliseconds: int | None) -> float | None:
    return None if milliseconds is None else milliseconds / 1000
