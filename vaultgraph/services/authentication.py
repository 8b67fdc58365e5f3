"""Authentication: `SVC-API-KEY` → the calling application, with a short in-process cache.

The cache holds a principal for `auth_cache_ttl` seconds (default 1 s), so a revoked key or a
deleted application stops working within that time on every replica, and at once on the
replica that handled the revocation: its process clears its cache and, when it is one of the
workers of `serve --workers N`, bumps the access generation they share (`access_generation`)
before it answers, so each of the others drops its cache on its next authentication.

A look-up that started before a revocation committed may finish after `invalidate` ran: it must
not put the old principal back. Each `invalidate` bumps a generation, and a look-up caches its
result only if the generation it started under is still current.

When an entry expires under load, every request holding that key misses at once: they share one
look-up (per key and generation) instead of each reading Neo4j. A look-up runs as a task of its
own, so a caller that goes away does not cancel it for the others.
"""

from __future__ import annotations

import asyncio
import hmac
import time

import orjson

from ..access_generation import AccessGeneration
from ..auth import apikeys
from ..auth.principal import Principal
from ..auth.rules import Rule
from ..crypto import TenantKeyCache
from ..errors import Unauthenticated
from ..repository.auth import AuthRepository

UNAUTHORIZED_DETAIL = "A valid API key is required in the SVC-API-KEY header."
CACHE_LIMIT = 10_000


class Authenticator:
    def __init__(self, repo: AuthRepository, tenant_keys: TenantKeyCache, ttl: float,
                 shared: AccessGeneration | None = None):
        self._repo = repo
        self._tenant_keys = tenant_keys
        self._ttl = ttl
        self._cache: dict[str, tuple[float, Principal]] = {}
        self._generation = 0
        self._flights: dict[tuple[str, int], asyncio.Task[Principal]] = {}
        self._shared = shared
        self._seen = shared.read() if shared is not None else b""

    def invalidate(self) -> None:
        """Access changed (committed) through this process: called before the answer."""
        self._generation += 1
        self._cache.clear()
        if self._shared is not None:
            self._shared.bump()
            self._seen = self._shared.read()

    def _follow_other_workers(self) -> None:
        """Another worker changed access since this one last looked: what this one cached, and
        the look-ups under way, may predate the change."""
        if self._shared is not None and (now := self._shared.read()) != self._seen:
            self._seen = now
            self._generation += 1
            self._cache.clear()

    async def authenticate(self, key: str | None) -> Principal:
        if not key or not apikeys.well_formed(key):
            raise Unauthenticated(UNAUTHORIZED_DETAIL)
        digest = apikeys.digest(key)
        self._follow_other_workers()
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        flight = (digest, self._generation)
        task = self._flights.get(flight)
        if task is None:
            task = asyncio.ensure_future(self._look_up(digest, self._generation, now))
            self._flights[flight] = task
            task.add_done_callback(lambda done: self._landed(flight, done))
        return await asyncio.shield(task)

    def _landed(self, flight: tuple[str, int], task: asyncio.Task) -> None:
        if self._flights.get(flight) is task:
            del self._flights[flight]
        if not task.cancelled():
            task.exception()  # retrieved: every waiter may have gone away

    async def _look_up(self, digest: str, generation: int, began: float) -> Principal:
        owner = await self._repo.key_owner(digest)
        if owner is None or not hmac.compare_digest(owner.digest, digest):
            self._cache.pop(digest, None)
            raise Unauthenticated(UNAUTHORIZED_DETAIL)
        principal = Principal(
            tenant_id=owner.tenant_id,
            application_id=owner.application_id,
            key_id=owner.key_id,
            permissions=frozenset(owner.permissions),
            rules=tuple(Rule.from_dict(r) for r in orjson.loads(owner.rules_json)),
            keys=self._tenant_keys.get(owner.tenant["id"], owner.tenant),
        )
        if generation != self._generation:
            return principal  # answered as of the read; never cached past an invalidation
        if len(self._cache) > CACHE_LIMIT:
            self._cache.clear()
        self._cache[digest] = (began + self._ttl, principal)  # as of the read's start
        return principal
