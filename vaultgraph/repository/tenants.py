"""Tenants in Neo4j: a tenant, its wrapped keys and its first application, in one statement;
listing them and replacing their wrapped keys (KEK rotation)."""

from __future__ import annotations

from typing import Any

from .database import Database

KEY_MATERIAL = ("dek_version", "wrapped_deks", "wrapped_hmac_key")


def _tenant(record) -> dict[str, Any]:
    raw = dict(record["tenant"])
    created = raw.get("created_at")
    return {
        "id": raw["id"], "name": raw.get("name"),
        "created_at": created.to_native() if created is not None else None,
        "applications": record["applications"],
        "key_material": {name: raw.get(name) for name in KEY_MATERIAL},
    }


class TenantRepository:
    def __init__(self, db: Database):
        self._db = db

    async def create(self, *, tenant_id: str, name: str, key_material: dict,
                     application_id: str, application_name: str, permissions: list[str],
                     rules: str, key_id: str, key_hash: str) -> None:
        await self._db.write(
            "tenants/create", tenant_id=tenant_id, name=name, key_material=key_material,
            application_id=application_id, application_name=application_name,
            permissions=permissions, rules=rules, key_id=key_id, hash=key_hash)

    async def page(self, after: str, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` tenants with ids after `after`, in id order, wrapped keys included."""
        return [_tenant(r) for r in await self._db.read("tenants/list", after=after,
                                                          limit=limit)]

    async def get(self, tenant_id: str) -> dict[str, Any] | None:
        records = await self._db.read("tenants/get", id=tenant_id)
        return _tenant(records[0]) if records else None

    async def replace_key_material(self, tenant_id: str, old: dict[str, str],
                                   new: dict[str, str]) -> bool:
        """False when the stored material is no longer `old` (changed meanwhile)."""
        records = await self._db.write("tenants/replace_key_material", id=tenant_id,
                                       old=old, new=new)
        return bool(records)

    async def key_sample(self, versions: list[str]) -> list[dict]:
        """Up to 20 tenants' stored key material wrapped under one of `versions`."""
        records = await self._db.read("tenants/key_sample", versions=versions)
        return [record.data() for record in records]

    async def key_census(self) -> dict[str, int]:
        """How many tenants have a key wrapped under each key-encryption key, by KEK id."""
        records = await self._db.read("tenants/key_census")
        return {record["kek"]: record["tenants"] for record in records}
