"""Webhooks and their outbox in Neo4j: one method per statement in cypher/webhooks/.

Events are written by the changes themselves (cypher/fragments/outbox.cypher, in the token
statements); this repository manages webhooks and hands deliveries to the sender: claims
(leases), outcomes, the attempts listed, and pruning.

Every management statement but the create finds only a webhook within `prefixes`, the caller's
`token:read` containers (each of its containers under one of them): one the caller could have
created. Any other is as absent as an unknown id (None, False, or left out of a page).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .database import Database
from .records import one_list


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery this worker holds until its lease lapses."""

    delivery: dict[str, Any]  # the stored event (no secret)
    # Never in a repr: the URL may hold a secret; the encrypted secrets and wrapped keys.
    webhook: dict[str, Any] = field(repr=False)
    tenant: dict[str, Any] = field(repr=False)


class WebhookRepository:
    def __init__(self, db: Database):
        self._db = db

    # -- management ---------------------------------------------------------------------------

    async def create(self, *, tenant_id: str, id: str, url: str, events: list[str],
                     containers: list[str], description: str | None, secret_ct: str,
                     actor: str | None) -> dict | None:
        """None when the tenant does not exist."""
        records = await self._db.write(
            "webhooks/create", tenant_id=tenant_id, id=id, url=url, events=events,
            containers=containers, description=description, secret_ct=secret_ct, actor=actor)
        return records[0]["webhook"] if records else None

    async def get(self, *, tenant_id: str, id: str, prefixes: list[str]) -> dict | None:
        records = await self._db.read("webhooks/get", tenant_id=tenant_id, id=id,
                                      prefixes=prefixes)
        return records[0]["webhook"] if records else None

    async def page(self, *, tenant_id: str, after: str, limit: int,
                   prefixes: list[str]) -> list[dict]:
        records = await self._db.read("webhooks/list", tenant_id=tenant_id, after=after,
                                      limit=limit, prefixes=prefixes)
        return one_list(records, "webhooks")

    async def update(self, *, tenant_id: str, id: str, prefixes: list[str],
                     changes: dict[str, Any], actor: str | None) -> dict | None:
        records = await self._db.write("webhooks/update", tenant_id=tenant_id, id=id,
                                       prefixes=prefixes, changes=changes, actor=actor)
        return records[0]["webhook"] if records else None

    async def delete(self, *, tenant_id: str, id: str, prefixes: list[str]) -> bool:
        return bool(await self._db.write("webhooks/delete", tenant_id=tenant_id, id=id,
                                         prefixes=prefixes))

    async def rotate_secret(self, *, tenant_id: str, id: str, prefixes: list[str],
                            secret_ct: str, overlap: float, actor: str | None) -> dict | None:
        records = await self._db.write(
            "webhooks/rotate_secret", tenant_id=tenant_id, id=id, prefixes=prefixes,
            secret_ct=secret_ct, overlap_ms=int(overlap * 1000), actor=actor)
        return records[0]["webhook"] if records else None

    async def send_test(self, *, tenant_id: str, id: str, prefixes: list[str], event_id: str,
                        actor: str | None) -> bool:
        return bool(await self._db.write("webhooks/send_test", tenant_id=tenant_id, id=id,
                                         prefixes=prefixes, event_id=event_id, actor=actor))

    async def retry_delivery(self, *, tenant_id: str, id: str, prefixes: list[str],
                             event_id: str) -> dict | None:
        """The delivery of `event_id` made due now: {found, in_flight, state}; None when the
        tenant has no such webhook within `prefixes`."""
        records = await self._db.write("webhooks/retry_delivery", tenant_id=tenant_id, id=id,
                                       prefixes=prefixes, event_id=event_id)
        return dict(records[0]) if records else None

    async def attempts(self, *, tenant_id: str, id: str, prefixes: list[str],
                       before: tuple[str, str] | None, limit: int) -> list[dict] | None:
        """A page of attempts newest first; None when the tenant has no such webhook."""
        before_at, before_id = before or ("9999-12-31T23:59:59Z", "~")
        records = await self._db.read(
            "webhooks/deliveries", tenant_id=tenant_id, id=id, prefixes=prefixes,
            before_at=before_at, before_id=before_id, limit=limit)
        return records[0]["attempts"] if records else None

    # -- the sender ---------------------------------------------------------------------------

    def after_write(self, listener: Callable[[str, dict[str, Any]], None]) -> None:
        """`listener(statement name, parameters)` after each write this process commits."""
        self._db.after_write(listener)

    async def claim(self, *, limit: int, lease: float, claim: str, room: dict[str, int],
                    room_default: int) -> list[Claimed]:
        """Up to `limit` due deliveries, of a webhook at most its `room` (webhook id: how many
        more this process may take on for it; `room_default` for one not named)."""
        busy = [w for w, n in room.items() if n <= 0]
        records = await self._db.write_unaudited(
            "webhooks/claim", limit=limit, scan=limit * 10, lease_ms=int(lease * 1000),
            claim=claim, busy=busy, room=room, room_default=room_default)
        return [Claimed(dict(r["delivery"]), dict(r["webhook"]), dict(r["tenant"]))
                for r in records]

    async def complete(self, outcomes: list[dict[str, Any]], *,
                       disable_after: float) -> list[str]:
        """Record attempts' outcomes (each {webhook_id, event_id, claim, success, outcome,
        status, error, duration_ms, response, retry_in}, in the order they ended) in one
        statement; the ids of the webhooks it disabled."""
        rows = [{"n": n, "webhook_id": o["webhook_id"], "event_id": o["event_id"],
                 "claim": o["claim"], "success": o["success"], "outcome": o["outcome"],
                 "status": o["status"], "error": o["error"], "duration_ms": o["duration_ms"],
                 "response": o["response"],
                 "retry_ms": None if o["retry_in"] is None else int(o["retry_in"] * 1000)}
                for n, o in enumerate(outcomes)]
        records = await self._db.write_unaudited(
            "webhooks/complete", outcomes=rows, disable_after_ms=int(disable_after * 1000))
        return [r["webhook_id"] for r in records if r["disabled"]]

    async def release(self, deliveries: list[dict[str, str]]) -> int:
        """Give claims back unsent ({webhook_id, event_id, claim} each): due again at once."""
        if not deliveries:
            return 0
        records = await self._db.write_unaudited("webhooks/release", deliveries=deliveries)
        return records[0]["released"] if records else 0

    async def prune(self, *, retention: float, delivered: float = 3600.0,
                    batch: int = 1000) -> int:
        """Attempts and failed deliveries older than `retention` seconds, and deliveries done
        more than `delivered` seconds ago."""
        records = await self._db.run_autocommit(
            "webhooks/prune", retention_ms=int(retention * 1000),
            delivered_ms=int(delivered * 1000), batch=batch)
        return records[0]["pruned"] if records else 0
