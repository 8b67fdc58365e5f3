"""Revocation and access changes across replicas (docs/operations.md, docs/applications.md): each
replica caches an authenticated key for VAULTGRAPH_AUTH_CACHE_TTL seconds; a change made
through replica A clears A's cache at once, and replica B, which cached the old answer, gives
the new one once its entry is older than the TTL."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from .conftest import two_replicas

TTL = 2.0
# How long past the TTL B may take to answer anew on a loaded machine (scheduling, a request
# in flight); a cache that ignored the TTL would keep the old answer for as long as it lives.
MARGIN = 8.0


async def call(http, method: str, url: str, key: str, **kwargs) -> tuple[int, dict]:
    async with http.request(method, url, headers={"SVC-API-KEY": key}, **kwargs) as resp:
        return resp.status, (await resp.json() if resp.status != 204 else {})


async def until_changed(http, method: str, url: str, key: str, old: int) -> tuple[int, float]:
    """Poll B's real answers until the status is no longer `old`: (new status, seconds)."""
    started = time.monotonic()
    while True:
        status, _ = await call(http, method, url, key)
        waited = time.monotonic() - started
        if status != old or waited > TTL + MARGIN:
            return status, waited
        await asyncio.sleep(0.1)


async def test_a_key_revoked_through_one_replica_stops_working_on_the_other(settings):
    with two_replicas(settings, VAULTGRAPH_AUTH_CACHE_TTL=str(TTL)) as (a, b):
        admin = a.create_tenant("revocation-across-replicas").key
        async with aiohttp.ClientSession() as http:
            status, app = await call(http, "POST", f"{a.url}/applications", admin,
                                     json={"name": "client", "permissions": ["token:read"]})
            assert status == 201
            old = app["key"]
            # B has seen the key work, so its cache holds it.
            status, me = await call(http, "GET", f"{b.url}/applications/self", old)
            assert (status, me["id"]) == (200, app["id"])
            old_key_id = me["key_id"]

            # Rotation through A: a new key, then the old one revoked.
            status, issued = await call(http, "POST", f"{a.url}/applications/{app['id']}/keys",
                                        admin)
            assert status == 201
            status, me = await call(http, "GET", f"{b.url}/applications/self", issued["key"])
            assert (status, me["key_id"]) == (200, issued["id"])  # new keys work everywhere
            status, _ = await call(http, "DELETE",
                                   f"{a.url}/applications/{app['id']}/keys/{old_key_id}", admin)
            assert status == 204

            status, refused = await call(http, "GET", f"{a.url}/applications/self", old)
            assert status == 401  # at once on the replica that revoked it
            status, waited = await until_changed(http, "GET", f"{b.url}/applications/self", old,
                                                 200)
            assert status == 401, f"B still accepted the revoked key after {waited:.1f}s"
            status, again = await call(http, "GET", f"{b.url}/applications/self", old)
            refused.pop("trace_id"), again.pop("trace_id")
            assert (status, again) == (401, refused)  # the one 401 body of an unknown key
            status, _ = await call(http, "GET", f"{b.url}/applications/self", issued["key"])
            assert status == 200


async def test_an_access_rule_changed_through_one_replica_holds_on_the_other(settings):
    with two_replicas(settings, VAULTGRAPH_AUTH_CACHE_TTL=str(TTL)) as (a, b):
        admin = a.create_tenant("rules-across-replicas").key
        async with aiohttp.ClientSession() as http:
            status, token = await call(http, "POST", f"{a.url}/tokens", admin,
                                       json={"type": "token", "data": "4242424242424242",
                                             "mask": "{{ data | last4 }}"})
            assert status == 201
            rule = {"container": "/", "priority": 1, "transform": "reveal",
                    "permissions": ["token:read"]}
            status, app = await call(http, "POST", f"{a.url}/applications", admin,
                                     json={"name": "reader", "permissions": ["token:read"],
                                           "rules": [rule]})
            assert status == 201
            read = f"{b.url}/tokens/{token['id']}"
            status, seen = await call(http, "GET", read, app["key"])
            assert (status, seen["data"]) == (200, "4242424242424242")  # cached on B

            # Through A: the rule now masks.
            status, _ = await call(http, "PUT", f"{a.url}/applications/{app['id']}", admin,
                                   json={"name": "reader", "permissions": ["token:read"],
                                         "rules": [{**rule, "transform": "mask"}]})
            assert status == 200
            status, seen = await call(http, "GET", f"{a.url}/tokens/{token['id']}", app["key"])
            assert (status, seen["data"]) == (200, "4242")  # at once on A
            started = time.monotonic()
            while seen["data"] != "4242" and time.monotonic() - started < TTL + MARGIN:
                await asyncio.sleep(0.1)
                status, seen = await call(http, "GET", read, app["key"])
            assert (status, seen["data"]) == (200, "4242")

            # Through A: the read permission taken away altogether.
            status, _ = await call(http, "PUT", f"{a.url}/applications/{app['id']}", admin,
                                   json={"name": "reader", "permissions": ["token:search"]})
            assert status == 200
            status, waited = await until_changed(http, "GET", read, app["key"], 200)
            assert status == 403, f"B still read the token after {waited:.1f}s"
