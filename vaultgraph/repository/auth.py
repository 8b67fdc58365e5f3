"""API key look-up: one index seek on the key's digest (cypher/auth/authenticate.cypher)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .database import Database


@dataclass(frozen=True, slots=True)
class KeyOwner:
    """The working key with this digest, its application and its tenant's wrapped keys."""

    key_id: str
    digest: str
    tenant_id: str
    application_id: str
    permissions: tuple[str, ...]
    rules_json: str
    tenant: dict[str, Any]


class AuthRepository:
    def __init__(self, db: Database):
        self._db = db

    async def key_owner(self, digest: str) -> KeyOwner | None:
        """None for an unknown or revoked key, or one whose application was deleted."""
        records = await self._db.read("auth/authenticate", hash=digest)
        if not records:
            return None
        rec = records[0]
        app = rec["application"]
        return KeyOwner(key_id=rec["key_id"], digest=rec["hash"], tenant_id=app["tenant_id"],
                        application_id=app["id"], permissions=tuple(app["permissions"] or ()),
                        rules_json=app["rules"] or "[]", tenant=dict(rec["tenant"]))
