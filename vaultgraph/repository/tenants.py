"""Tenants in Neo4j: a tenant, its wrapped keys and its first application, in one statement."""

from __future__ import annotations

from .database import Database


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

    async def key_sample(self, versions: list[str]) -> list[dict]:
        """Up to 20 tenants' stored key material wrapped under one of `versions`."""
        records = await self._db.read("tenants/key_sample", versions=versions)
        return [record.data() for record in records]
