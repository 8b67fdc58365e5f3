"""Concurrent look-ups of one key share a single read of Neo4j (the cache's entry expired under
load must not become a burst of identical reads), and never across an invalidation."""

from __future__ import annotations

import asyncio

import pytest
from factories import database

from vaultgraph.api.typedefs import services_key
from vaultgraph.errors import Unauthenticated
from vaultgraph.repository.auth import AuthRepository
from vaultgraph.services.authentication import Authenticator


class CountingAuthRepository(AuthRepository):
    """The real repository on the real Neo4j; it counts its reads and holds each answer until
    the test lets it go, so concurrent callers surely overlap."""

    def __init__(self, db):
        super().__init__(db)
        self.reads = 0
        self.release = asyncio.Event()

    async def key_owner(self, digest):
        self.reads += 1
        owner = await super().key_owner(digest)
        await self.release.wait()
        return owner


def authenticator(app, repo) -> Authenticator:
    return Authenticator(repo, app[services_key].authenticator._tenant_keys, ttl=60)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_concurrent_lookups_of_one_key_read_neo4j_once(client, tenant):
    app = client.server.app
    repo = CountingAuthRepository(database(app))
    auth = authenticator(app, repo)
    callers = [asyncio.create_task(auth.authenticate(tenant.key)) for _ in range(20)]
    await settle()
    repo.release.set()
    principals = await asyncio.gather(*callers)
    assert repo.reads == 1
    assert {p.application_id for p in principals} == {tenant.application_id}
    await auth.authenticate(tenant.key)  # cached now
    assert repo.reads == 1


async def test_an_unknown_key_refuses_every_waiter_after_one_read(client, tenant):
    app = client.server.app
    repo = CountingAuthRepository(database(app))
    auth = authenticator(app, repo)
    unknown = tenant.key[:-4] + ("AAAA" if not tenant.key.endswith("AAAA")
                                       else "BBBB")
    callers = [asyncio.create_task(auth.authenticate(unknown)) for _ in range(10)]
    await settle()
    repo.release.set()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert repo.reads == 1
    assert all(isinstance(r, Unauthenticated) for r in results)


async def test_a_caller_going_away_does_not_cancel_the_lookup_for_the_others(client, tenant):
    app = client.server.app
    repo = CountingAuthRepository(database(app))
    auth = authenticator(app, repo)
    first = asyncio.create_task(auth.authenticate(tenant.key))
    second = asyncio.create_task(auth.authenticate(tenant.key))
    await settle()
    first.cancel()
    repo.release.set()
    assert (await second).application_id == tenant.application_id
    with pytest.raises(asyncio.CancelledError):
        await first
    assert repo.reads == 1


async def test_a_lookup_begun_after_an_invalidation_does_not_join_an_older_one(client, tenant):
    app = client.server.app
    repo = CountingAuthRepository(database(app))
    auth = authenticator(app, repo)
    before = asyncio.create_task(auth.authenticate(tenant.key))
    await settle()
    auth.invalidate()  # e.g. a key revoked meanwhile: the next caller must read afresh
    after = asyncio.create_task(auth.authenticate(tenant.key))
    await settle()
    repo.release.set()
    await asyncio.gather(before, after)
    assert repo.reads == 2
