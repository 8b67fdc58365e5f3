"""Token statements: one method per file in cypher/tokens/."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from neo4j import AsyncManagedTransaction

from ..db import Database


class TokenRepository:
    def __init__(self, db: Database):
        self.db = db

    async def create(self, *, tenant_id: str, id: str, props: dict, expires_at: datetime | None,
                     meta_kvs: list[str], dedup: bool, parent_id: str | None = None,
                     parent_prefixes: list[str] | None = None,
                     expired: tuple[str, str]) -> tuple[dict, bool] | None:
        """The created (or, with dedup, the existing) token; None when the parent is not found.

        `expired` is the (deleted_by, deleted_reason) given to an expired token that still
        holds the id: it is retired as the expiry sweeper would retire it.
        """
        records = await self.db.write(
            "tokens/create", tenant_id=tenant_id, id=id, props=props, expires_at=expires_at,
            meta_kvs=meta_kvs, dedup=dedup, parent_id=parent_id,
            parent_prefixes=parent_prefixes or [], expired_actor=expired[0],
            expired_reason=expired[1])
        if not records:
            return None
        return records[0]["token"], records[0]["deduplicated"]

    async def get(self, *, tenant_id: str, id: str, prefixes: list[str]) -> dict | None:
        records = await self.db.read("tokens/get", tenant_id=tenant_id, id=id, prefixes=prefixes)
        return records[0]["token"] if records else None

    async def list(self, statement: str, *, tenant_id: str, prefixes: list[str], after: str,
                   limit: int, ids: list[str] | None, types: list[str] | None,
                   meta_kvs: list[str]) -> list[dict]:
        records = await self.db.read(
            statement, tenant_id=tenant_id, prefixes=prefixes, after=after,
            limit=limit, ids=ids, types=types, meta_kvs=meta_kvs)
        return [r["token"] for r in records]

    async def delete(self, *, tenant_id: str, id: str, prefixes: list[str], actor: str) -> bool:
        records = await self.db.write(
            "tokens/delete", tenant_id=tenant_id, id=id, prefixes=prefixes, actor=actor,
            reason="deleted", merged_into=None)
        return bool(records)

    # -- the update transaction ---------------------------------------------------------------

    async def lock_for_update(self, tx: AsyncManagedTransaction, *, tenant_id: str, id: str,
                              prefixes: list[str]) -> dict | None:
        records = await self.db.run(tx, "tokens/lock_for_update", tenant_id=tenant_id, id=id,
                                    prefixes=prefixes)
        return records[0]["token"] if records else None

    async def find_duplicate(self, tx: AsyncManagedTransaction, *, tenant_id: str, id: str,
                             type: str, fingerprint: str) -> dict | None:
        records = await self.db.run(tx, "tokens/find_duplicate", tenant_id=tenant_id, id=id,
                                    type=type, fingerprint=fingerprint)
        return records[0]["token"] if records else None

    async def merge_into(self, tx: AsyncManagedTransaction, *, tenant_id: str, id: str,
                         into: str, actor: str) -> None:
        await self.db.run(tx, "tokens/move_edges", tenant_id=tenant_id, id=id, into=into)
        await self.db.run(tx, "tokens/delete", tenant_id=tenant_id, id=id, prefixes=["/"],
                          actor=actor, reason="deduplicated", merged_into=into)

    async def update(self, tx: AsyncManagedTransaction, *, tenant_id: str, id: str,
                     props: dict[str, Any], expires_at: datetime | None,
                     meta_kvs: list[str]) -> dict:
        records = await self.db.run(tx, "tokens/update", tenant_id=tenant_id, id=id, props=props,
                                    expires_at=expires_at, meta_kvs=meta_kvs)
        return records[0]["token"]
