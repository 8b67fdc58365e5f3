"""Tenants: created with their keys and a management application, in one transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import orjson

from ..auth import apikeys
from ..auth.permissions import ALL_PERMISSIONS, TOKEN_PERMISSIONS
from ..auth.rules import REVEAL, Rule
from ..crypto import CryptoError, KeyRing, TenantKeys, new_tenant_key_material
from ..errors import WrongKey
from ..repository.tenants import TenantRepository


@dataclass(frozen=True)
class NewTenant:
    tenant_id: str
    application_id: str
    key: str

    def to_dict(self) -> dict:
        return {"tenant_id": self.tenant_id, "application_id": self.application_id,
                "key": self.key}


# The tenant's first application may do everything, and reveals: it is the root from which
# every other application is granted (never more than its creator holds).
ROOT_RULES = (Rule(container="/", transform=REVEAL, permissions=frozenset(TOKEN_PERMISSIONS),
                   description="tenant administrator"),)


class TenantService:
    def __init__(self, repo: TenantRepository, ring: KeyRing):
        self._repo = repo
        self._ring = ring

    async def create(self, name: str) -> NewTenant:
        """A tenant with fresh wrapped keys and its administrator application (all at once)."""
        tenant_id = str(uuid.uuid4())
        application_id = str(uuid.uuid4())
        key = apikeys.generate()
        await self._repo.create(
            tenant_id=tenant_id, name=name,
            key_material=new_tenant_key_material(self._ring, tenant_id),
            application_id=application_id, application_name=f"{name} administrator",
            permissions=list(ALL_PERMISSIONS),
            rules=orjson.dumps([r.to_dict() for r in ROOT_RULES]).decode(),
            key_id=str(uuid.uuid4()), key_hash=apikeys.digest(key),
        )
        return NewTenant(tenant_id, application_id, key)

    async def verify_key_ring(self) -> None:
        """Start-up check: the key ring opens the tenant keys stored under its versions (a valid
        but wrong KEK would otherwise start, say ready, and fail every read). Raises
        `WrongKey` when none of a sample opens; nothing stored under its versions passes."""
        sample = await self._repo.key_sample(list(self._ring.versions))
        for stored in sample:
            try:
                TenantKeys.unwrap(self._ring, stored["tenant_id"], stored)
            except CryptoError:
                continue
            return
        if sample:
            raise WrongKey()
