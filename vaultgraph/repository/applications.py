"""Applications and their API keys in Neo4j: one method per statement in cypher/applications/.

Every statement is scoped by the caller's `tenant_id`; an application of another tenant is
indistinguishable from one that does not exist. Key material never passes through here, only
key digests on the way in, and key ids and dates on the way out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from neo4j import AsyncManagedTransaction

from ..auth.rules import Rule
from ..db import Database

# The first page starts after this position: earlier than any created_at, before any id.
BEGINNING = ("0001-01-01T00:00:00Z", "")


@dataclass(frozen=True)
class Application:
    id: str
    tenant_id: str
    name: str
    permissions: tuple[str, ...]
    rules: tuple[Rule, ...]
    created_at: datetime
    created_by: str | None
    modified_at: datetime | None = None


@dataclass(frozen=True)
class ApiKeyInfo:
    id: str
    application_id: str
    created_at: datetime


@dataclass(frozen=True)
class ApplicationDraft:
    """What a create or a replace writes: validated, normalised, already checked for grants."""
    name: str
    permissions: tuple[str, ...]
    rules: tuple[Rule, ...]

    def params(self) -> dict[str, Any]:
        return {"name": self.name, "permissions": list(self.permissions),
                "rules": orjson.dumps([r.to_dict() for r in self.rules]).decode()}


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
        self.db = db

    async def create(self, tenant_id: str, application_id: str, draft: ApplicationDraft, *,
                     created_by: str | None, key_id: str, key_hash: str) -> Application | None:
        """None when the tenant does not exist."""
        records = await self.db.write(
            "applications/create", tenant_id=tenant_id, application_id=application_id,
            created_by=created_by, key_id=key_id, hash=key_hash, **draft.params())
        return _application(records[0]["application"]) if records else None

    async def get(self, tenant_id: str, application_id: str) -> Application | None:
        records = await self.db.read("applications/get", tenant_id=tenant_id, id=application_id)
        return _application(records[0]["application"]) if records else None

    async def page(self, tenant_id: str, after: tuple[str, str] | None,
                   limit: int) -> list[tuple[Application, tuple[str, str]]]:
        """Up to `limit` applications after the position, each with its own position."""
        after_at, after_id = after or BEGINNING
        records = await self.db.read("applications/list", tenant_id=tenant_id,
                                     after_at=after_at, after_id=after_id, limit=limit)
        return [(_application(r["application"]), (r["position"], r["application"]["id"]))
                for r in records]

    async def keys(self, tenant_id: str, application_id: str) -> list[ApiKeyInfo] | None:
        """The working keys of an application; None when there is no such application."""
        records = await self.db.read("applications/list_keys", tenant_id=tenant_id,
                                     application_id=application_id)
        return [_key(k) for k in records[0]["keys"]] if records else None

    # The methods below run inside one managed write transaction (`Database.write_tx`).

    async def lock(self, tx: AsyncManagedTransaction, tenant_id: str,
                   application_id: str) -> Application | None:
        records = await self.db.run(tx, "applications/lock", tenant_id=tenant_id,
                                    id=application_id)
        return _application(records[0]["application"]) if records else None

    async def update(self, tx: AsyncManagedTransaction, tenant_id: str, application_id: str,
                     draft: ApplicationDraft, *, modified_by: str) -> Application:
        records = await self.db.run(
            tx, "applications/update", tenant_id=tenant_id, id=application_id,
            modified_by=modified_by, **draft.params())
        return _application(records[0]["application"])

    async def delete(self, tx: AsyncManagedTransaction, tenant_id: str, application_id: str, *,
                     deleted_by: str) -> None:
        await self.db.run(tx, "applications/delete", tenant_id=tenant_id, id=application_id,
                          deleted_by=deleted_by)

    async def create_key(self, tx: AsyncManagedTransaction, tenant_id: str,
                         application_id: str, *, key_id: str, key_hash: str) -> ApiKeyInfo:
        records = await self.db.run(
            tx, "applications/create_key", tenant_id=tenant_id, application_id=application_id,
            key_id=key_id, hash=key_hash)
        return _key(records[0]["key"])

    async def revoke_key(self, tx: AsyncManagedTransaction, tenant_id: str,
                         application_id: str, key_id: str, *, revoked_by: str) -> bool:
        records = await self.db.run(
            tx, "applications/revoke_key", tenant_id=tenant_id, application_id=application_id,
            key_id=key_id, revoked_by=revoked_by)
        return bool(records)
