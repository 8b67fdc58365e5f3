"""Tenants: created with their keys and a management application, in one transaction; listed,
shown, and their wrapped keys re-wrapped under a new key-encryption key (KEK rotation)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from marshmallow import Schema, fields

from ..applications.schemas import MAX_NAME, name_rules
from ..auth import apikeys
from ..auth.permissions import ALL_PERMISSIONS, TOKEN_PERMISSIONS
from ..auth.rules import REVEAL, Rule
from ..crypto import (
    CryptoError,
    KeyRing,
    TenantKeys,
    needs_rewrap,
    new_tenant_key_material,
    rewrap,
)
from ..errors import Conflict, NotFound, WrongKey
from ..repository.tenants import TenantRepository
from ..tokens.fields import format_datetime

NO_SUCH_TENANT = "No tenant with this id."
# A tenant's administrator application is named after it, under the rule of every application's
# name (1 to 200 printable characters, not blank): the tenant's name leaves room for the suffix.
ADMINISTRATOR_SUFFIX = " administrator"
MAX_TENANT_NAME = MAX_NAME - len(ADMINISTRATOR_SUFFIX)


class _NameSchema(Schema):
    """A new tenant's name: an application's name (`name_rules`) with room for
    ADMINISTRATOR_SUFFIX."""

    name = fields.String(required=True, validate=name_rules(MAX_TENANT_NAME))


_NAME = _NameSchema()


def check_tenant_name(name: str) -> str:
    """`name` when a tenant may have it; marshmallow's ValidationError naming `name` (an
    invalid-input error, exit status 2 on the command line) otherwise."""
    return _NAME.load({"name": name})["name"]


@dataclass(frozen=True)
class NewTenant:
    """A new tenant, its administrator application, that application's key and the key's id
    (`to_dict`: what `tenants create` prints, no key id)."""

    tenant_id: str
    application_id: str
    key: str = field(repr=False)  # shown once: never in a repr (a traceback, a log)
    key_id: str

    def to_dict(self) -> dict:
        return {"tenant_id": self.tenant_id, "application_id": self.application_id,
                "key": self.key}


# The tenant's first application may do everything, and reveals: it is the root from which
# every other application is granted (never more than its creator holds).
ROOT_RULES = (Rule(container="/", transform=REVEAL, permissions=frozenset(TOKEN_PERMISSIONS),
                   description="tenant administrator"),)


class KeysChanged(Conflict):
    """A re-wrap's compare-and-set matched nothing: the tenant's keys changed since they were
    read (a concurrent DEK rotation), and are read again."""

    default_detail = "The tenant's keys changed while they were re-wrapped."


# How the caller of a rotation takes part in each tenant's re-wrap (`rewrap_all`): called with
# the tenant's id, the KEKs its keys are wrapped under and the ones they will be, and the
# re-wrap's write (a compare-and-set), which it awaits. The write raises `KeysChanged` when it
# matched nothing; the rotation then reads the tenant again. Once the write returns, the
# tenant's re-wrap is committed: the command line's event for it, which the write stores in its
# transaction, is linked there (cli/keys.py), so a run stopped half-way has left the events of
# the tenants it re-wrapped.
Rewrapping = Callable[[str, list[str], list[str], Callable[[], Awaitable[None]]],
                      Awaitable[None]]


async def _just_write(tenant_id: str, before: list[str], after: list[str],
                      write: Callable[[], Awaitable[None]]) -> None:
    await write()


@dataclass
class Rewrap:
    """What a KEK rotation pass did; `failed` names tenants whose keys the ring cannot unwrap."""

    active: str
    rewrapped: int = 0
    current: int = 0
    failed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"active_key_version": self.active, "rewrapped": self.rewrapped,
                "already_current": self.current, "failed": self.failed}


def tenant_body(tenant: dict[str, Any]) -> dict:
    """A tenant as the CLI shows it: ids, name, counts and key versions, never key material."""
    material = tenant["key_material"]
    return {
        "id": tenant["id"], "name": tenant["name"],
        "created_at": format_datetime(tenant["created_at"]) if tenant["created_at"] else None,
        "applications": tenant["applications"],
        "dek_version": material["dek_version"],
        "kek_versions": kek_versions(material),
    }


def kek_versions(material: dict[str, Any]) -> list[str]:
    """The KEKs a tenant's stored key material is wrapped under, sorted."""
    blobs = [entry.partition(":")[2] for entry in (material["wrapped_deks"] or "").split(",")]
    blobs.append(material["wrapped_hmac_key"] or "")
    return sorted({blob.partition(".")[0] for blob in blobs if blob})


class TenantService:
    def __init__(self, repo: TenantRepository, ring: KeyRing,
                 reload: Callable[[], KeyRing] | None = None, *, shared: bool = False):
        self._repo = repo
        self._ring = ring
        self._reload = reload  # the ring with the key file read again (`verify_key_ring`)
        self._shared = shared  # VAULTGRAPH_SHARED_DATABASE (`verify_key_ring`)

    @property
    def ring(self) -> KeyRing:
        return self._ring

    def with_ring(self, ring: KeyRing) -> TenantService:
        """The same tenants under another ring (a rotation's target KEK active)."""
        return TenantService(self._repo, ring)

    async def create(self, name: str) -> NewTenant:
        """A tenant with fresh wrapped keys and its administrator application (all at once)."""
        name = check_tenant_name(name)
        tenant_id = str(uuid.uuid4())
        application_id = str(uuid.uuid4())
        key, key_id = apikeys.generate(), str(uuid.uuid4())
        await self._repo.create(
            tenant_id=tenant_id, name=name,
            key_material=await self._ring.run(new_tenant_key_material, self._ring, tenant_id),
            application_id=application_id, application_name=name + ADMINISTRATOR_SUFFIX,
            permissions=list(ALL_PERMISSIONS),
            rules=orjson.dumps([r.to_dict() for r in ROOT_RULES]).decode(),
            key_id=key_id, key_hash=apikeys.digest(key),
        )
        return NewTenant(tenant_id, application_id, key, key_id)

    async def get(self, tenant_id: str) -> dict:
        found = await self._repo.get(tenant_id)
        if found is None:
            raise NotFound(NO_SUCH_TENANT)
        return tenant_body(found)

    async def page(self, after: str, size: int) -> list[dict]:
        return [tenant_body(t) for t in await self._repo.page(after, size)]

    async def pending_rewrap(self, only: set[str] | None = None, page: int = 500) -> int:
        """How many tenants (of `only`, if given) hold keys wrapped under a KEK other than the
        ring's active one."""
        count, after = 0, ""
        while rows := await self._repo.page(after, page):
            count += sum(1 for t in rows if (only is None or t["id"] in only) and self._needs(t))
            after = rows[-1]["id"]
        return count

    def _needs(self, tenant: dict[str, Any]) -> bool:
        try:
            return needs_rewrap(self._ring, tenant["key_material"])
        except CryptoError:  # incomplete material: rewrap_all reports it as failed
            return True

    async def rewrap_all(self, progress: Callable[[int, int], None] = lambda done, total: None,
                         *, only: set[str] | None = None, page: int = 200,
                         rewrapping: Rewrapping = _just_write) -> Rewrap:
        """Re-wrap every tenant's keys under the active KEK, a tenant at a time, online: each
        write is a compare-and-set, so a concurrent change is re-read, never overwritten, and a
        run that stops half-way is finished by the next (tenants already current are skipped).
        Each write is made through `rewrapping` (`Rewrapping`); `progress` is called after
        it."""
        total = await self.pending_rewrap(only)
        result = Rewrap(self._ring.active)
        after = ""
        while rows := await self._repo.page(after, page):
            after = rows[-1]["id"]
            for tenant in rows:
                if only is not None and tenant["id"] not in only:
                    continue
                if not self._needs(tenant):
                    result.current += 1
                    continue
                rewrapped = await self._rewrap(tenant, rewrapping)
                if rewrapped:
                    result.rewrapped += 1
                elif rewrapped is False:
                    result.failed.append(tenant["id"])
                progress(result.rewrapped + len(result.failed), total)
        return result

    async def _rewrap(self, tenant: dict[str, Any], rewrapping: Rewrapping) -> bool | None:
        """One tenant's re-wrap, tried up to three times: True once written; False when it
        cannot be (the ring does not unwrap the tenant's keys, or they changed at each try);
        None when a try found them changed so that they need it no more (or the tenant gone).
        """
        for _attempt in range(3):
            old = tenant["key_material"]
            try:
                new = await self._ring.run(rewrap, self._ring, tenant["id"], old)
            except CryptoError:
                return False
            try:
                await rewrapping(tenant["id"], kek_versions(old), kek_versions(new),
                                 self._replacing(tenant["id"], old, new))
            except KeysChanged:
                tenant = await self._repo.get(tenant["id"])  # changed meanwhile: re-read
                if tenant is None or not self._needs(tenant):
                    return None
            else:
                return True
        return False

    def _replacing(self, tenant_id: str, old: dict[str, Any], new: dict[str, Any]
                   ) -> Callable[[], Awaitable[None]]:
        """A re-wrap's write: `new` stored if the tenant's keys are still `old`, else
        `KeysChanged`."""
        async def write() -> None:
            if not await self._repo.replace_key_material(tenant_id, old, new):
                raise KeysChanged()

        return write

    async def verify_key_ring(self) -> None:
        """The key check run before serving and before a command wraps keys: the ring opens
        the tenant keys the database holds. Raises `WrongKey` (one line, KEK ids and tenant ids
        only) when any tenant is wrapped under a KEK the ring lacks (its requests would be 500s:
        a wrong or old key file, a token not configured), or when a KEK of the ring does not
        open a sample of the tenants stored under it (a valid but wrong key under the same
        version, another token's key under the same label). A database without tenants
        passes. In a database shared on purpose (`shared`: other vaults' tenants, under their
        own throwaway KEKs) only the tenants under this ring's KEKs are checked."""
        census = await self._repo.key_census()
        ring = self._ring
        missing = {kek: n for kek, n in census.items() if not ring.holds(kek)}
        if missing and self._reload is not None and not all(
                kek.startswith(PKCS11) for kek in missing):
            # A file version added by `keys rotate` after this ring was read: read it again.
            ring = self._reload()
            missing = {kek: n for kek, n in census.items() if not ring.holds(kek)}
        if missing and not self._shared:
            raise WrongKey(*missing_keys_message(missing, ring))
        for kek in (kek for kek in census if kek not in missing):
            sample = await self._repo.key_sample([kek])
            failed = await ring.run(self._not_opening, ring, sample)
            if failed:
                raise WrongKey(*wrong_key_message(kek, failed, len(sample)))

    @staticmethod
    def _not_opening(ring: KeyRing, sample: list[dict]) -> list[str]:
        """The ids of the sampled tenants whose keys `ring` does not unwrap."""
        failed = []
        for stored in sample:
            try:
                TenantKeys.unwrap(ring, stored["tenant_id"], stored)
            except CryptoError:
                failed.append(stored["tenant_id"])
        return failed

    async def kek_census(self, page: int = 500) -> AsyncIterator[dict]:
        """Each tenant's id, name and the KEKs its keys are wrapped under (`keys status`)."""
        after = ""
        while rows := await self._repo.page(after, page):
            after = rows[-1]["id"]
            for tenant in rows:
                body = tenant_body(tenant)
                yield {"id": body["id"], "name": body["name"],
                       "kek_versions": body["kek_versions"],
                       "current": not self._needs(tenant)}


PKCS11 = "pkcs11:"
FILE_FIX = "configure the key ring the data was written with (VAULTGRAPH_KEK / VAULTGRAPH_KEK_FILE)"
TOKEN_FIX = ("configure the token (VAULTGRAPH_PKCS11_MODULE, VAULTGRAPH_PKCS11_TOKEN_LABEL, "
             "VAULTGRAPH_PKCS11_PIN_FILE) and key the data was written with")


def _ids(ids: list[str], shown: int = 3) -> str:
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def missing_keys_message(missing: dict[str, int], ring: KeyRing) -> tuple[str, str]:
    """The refusal when tenants are wrapped under KEKs the ring lacks: how many under which."""
    counts = [f"{n} tenant{'s' if n != 1 else ''} under {kek}" for kek, n in missing.items()]
    cause = (f"{' and '.join(counts)} {'are' if sum(missing.values()) != 1 else 'is'} wrapped "
             f"by a key-encryption key the key ring ({', '.join(ring.versions)}) does not hold")
    token = any(kek.startswith(PKCS11) for kek in missing)
    file = not all(kek.startswith(PKCS11) for kek in missing)
    fix = " and ".join(([FILE_FIX] if file else []) + ([TOKEN_FIX] if token else []))
    return cause, fix


def wrong_key_message(kek: str, failed: list[str], sampled: int) -> tuple[str, str]:
    """The refusal when a KEK of the ring does not open tenants stored under it (by id)."""
    token = kek.startswith(PKCS11)
    return (f"the key-encryption key {kek}{' in the PKCS#11 token' if token else ''} does not "
            f"open the tenant keys stored in Neo4j under it (tenant{'s' if len(failed) > 1 else ''}"
            f" {_ids(failed)}; {len(failed)} of {sampled} sampled)",
            TOKEN_FIX if token else FILE_FIX)
