"""Applications and their API keys in Neo4j: one method per statement in cypher/applications/.

Every statement is scoped by the caller's `tenant_id`; an application of another tenant is
indistinguishable from one that does not exist. Key material never passes through here, only
key digests on the way in, and key ids and dates on the way out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

import orjson

from ..applications.model import ApiKeyInfo, Application, ApplicationDraft
from ..auth.rules import Rule
from .database import Database, Transaction

T = TypeVar("T")

# The first page starts after this position: earlier than any created_at, before any id.
BEGINNING = ("0001-01-01T00:00:00Z", "")


def _native(value) -> datetime | None:
    return value.to_native() if value is not None else None


def _application(raw: dict) -> Application:
    return Application(
        id=raw["id"], tenant_id=raw["tenant_id"], name=raw["name"],
        permissions=tuple(raw["permissions"] or ()),
        rules=tuple(Rule.from_dict(r) for r in orjson.loads(raw["rules"] or "[]")),
        created_at=_native(raw["created_at"]), created_by=raw["created_by"],
        modified_at=_native(raw["modified_at"]),
    )


def _key(raw: dict) -> ApiKeyInfo:
    return ApiKeyInfo(id=raw["id"], application_id=raw["application_id"],
                      created_at=_native(raw["created_at"]))


class ApplicationRepository:
    def __init__(self, db: Database):
        self._db = db

    async def create(self, tenant_id: str, application_id: str, draft: ApplicationDraft, *,
                     created_by: str | None, key_id: str, key_hash: str) -> Application | None:
        """None when the tenant does not exist."""
        records = await self._db.write(
            "applications/create", tenant_id=tenant_id, application_id=application_id,
            created_by=created_by, key_id=key_id, hash=key_hash, **draft.params())
        return _application(records[0]["application"]) if records else None

    async def get(self, tenant_id: str, application_id: str) -> Application | None:
        records = await self._db.read("applications/get", tenant_id=tenant_id, id=application_id)
        return _application(records[0]["application"]) if records else None

    async def tenant_exists(self, tenant_id: str) -> bool:
        return bool(await self._db.read("tenants/get", id=tenant_id))

    async def page(self, tenant_id: str, after: tuple[str, str] | None,
                   limit: int) -> list[tuple[Application, tuple[str, str]]]:
        """Up to `limit` applications after the position, each with its own position."""
        after_at, after_id = after or BEGINNING
        records = await self._db.read("applications/list", tenant_id=tenant_id,
                                     after_at=after_at, after_id=after_id, limit=limit)
        return [(_application(r["application"]), (r["position"], r["application"]["id"]))
                for r in records]

    async def keys(self, tenant_id: str, application_id: str) -> list[ApiKeyInfo] | None:
        """The working keys of an application; None when there is no such application."""
        records = await self._db.read("applications/list_keys", tenant_id=tenant_id,
                                     application_id=application_id)
        return [_key(k) for k in records[0]["keys"]] if records else None

    async def unit_of_work(self, work: Callable[[ApplicationUnitOfWork], Awaitable[T]]) -> T:
        """Run `work` in one write transaction: lock the application, check, then write."""
        return await self._db.transaction(lambda tx: work(ApplicationUnitOfWork(tx)))


class ApplicationUnitOfWork:
    """Management writes, each after `lock` in the same transaction."""

    def __init__(self, tx: Transaction):
        self._tx = tx

    async def lock(self, tenant_id: str,
                   application_id: str) -> Application | None:
        records = await self._tx.run("applications/lock", tenant_id=tenant_id,
                                    id=application_id)
        return _application(records[0]["application"]) if records else None

    async def update(self, tenant_id: str, application_id: str,
                     draft: ApplicationDraft, *, modified_by: str) -> Application:
        records = await self._tx.run(
            "applications/update", tenant_id=tenant_id, id=application_id,
            modified_by=modified_by, **draft.params())
        return _application(records[0]["application"])

    async def delete(self, tenant_id: str, application_id: str, *,
                     deleted_by: str) -> None:
        await self._tx.run("applications/delete", tenant_id=tenant_id, id=application_id,
                          deleted_by=deleted_by)

    async def create_key(self, tenant_id: str,
                         application_id: str, *, key_id: str, key_hash: str) -> ApiKeyInfo:
        records = await self._tx.run(
            "applications/create_key", tenant_id=tenant_id, application_id=application_id,
            key_id=key_id, hash=key_hash)
        return _key(records[0]["key"])

    async def revoke_key(self, tenant_id: str,
                         application_id: str, key_id: str, *, revoked_by: str) -> bool:
        records = await self._tx.run(
            "applications/revoke_key", tenant_id=tenant_id, application_id=application_id,
            key_id=key_id, revoked_by=revoked_by)
        return bool(records)
