"""Authentication: `SVC-API-KEY` → application, with a short in-process cache.

The cache holds a principal for `auth_cache_ttl` seconds (default 1 s), so a revoked key or a
deleted application stops working within that time on every replica, and at once on the
replica that handled the revocation (it clears its cache).
"""

from __future__ import annotations

import hmac
import time

import orjson

from .. import problems
from ..crypto import TenantKeyCache
from ..db import Database
from . import apikeys
from .principal import Principal
from .rules import Rule

HEADER = "SVC-API-KEY"
UNAUTHORIZED_DETAIL = "A valid API key is required in the SVC-API-KEY header."


class Authenticator:
    def __init__(self, db: Database, tenant_keys: TenantKeyCache, ttl: float):
        self._db = db
        self._tenant_keys = tenant_keys
        self._ttl = ttl
        self._cache: dict[str, tuple[float, Principal]] = {}

    def invalidate(self) -> None:
        self._cache.clear()

    async def authenticate(self, key: str | None) -> Principal:
        if not key or not apikeys.well_formed(key):
            raise problems.Unauthorized(UNAUTHORIZED_DETAIL)
        digest = apikeys.digest(key)
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        records = await self._db.read("auth/authenticate", hash=digest)
        if not records or not hmac.compare_digest(records[0]["hash"], digest):
            self._cache.pop(digest, None)
            raise problems.Unauthorized(UNAUTHORIZED_DETAIL)
        rec = records[0]
        app = rec["application"]
        tenant = rec["tenant"]
        principal = Principal(
            tenant_id=app["tenant_id"],
            application_id=app["id"],
            key_id=rec["key_id"],
            permissions=frozenset(app["permissions"] or ()),
            rules=tuple(Rule.from_dict(r) for r in orjson.loads(app["rules"] or "[]")),
            keys=self._tenant_keys.get(tenant["id"], tenant),
        )
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[digest] = (now + self._ttl, principal)
        return principal
