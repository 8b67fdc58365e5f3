"""Rate limits (docs/bulk-and-idempotency.md): a token bucket per application with RateLimit-*
headers on every authenticated answer, 429 past it; failed authentications throttled per address."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from factories import new_tenant

from vaultgraph.api.typedefs import services_key
from vaultgraph.app import create_app
from vaultgraph.auth import apikeys

from ._support import VISA, application, call, card

BURST = 3


@pytest.fixture
def app(settings):
    # A refill far slower than any test: the bucket holds exactly BURST requests here.
    return create_app(dataclasses.replace(settings, rate_limit=0.001, rate_burst=BURST,
                                          auth_failure_limit=3, auth_failure_window=3600.0))


async def test_every_answer_carries_the_buckets_state_and_429_past_it(client, admin_headers):
    seen = []
    for expect in (201, 404):
        resp, _ = await call(client, "POST" if expect == 201 else "GET",
                             "/tokens" if expect == 201 else "/tokens/none", admin_headers,
                             json=card(VISA) if expect == 201 else None, expect=expect)
        seen.append(resp.headers)
    # The tenant fixture's first request spent nothing: it ran through the service directly.
    assert [h["RateLimit-Remaining"] for h in seen] == [str(BURST - 1), str(BURST - 2)]
    assert {h["RateLimit-Limit"] for h in seen} == {str(BURST)}
    assert all(int(h["RateLimit-Reset"]) > 0 for h in seen)
    await call(client, "GET", "/tokens", admin_headers)
    resp, problem = await call(client, "GET", "/tokens", admin_headers, expect=429)
    assert problem["type"].endswith("/rate-limited")
    assert int(resp.headers["Retry-After"]) >= 1
    assert resp.headers["RateLimit-Remaining"] == "0"


async def test_buckets_are_per_application(client, admin_headers):
    other = await application(client, admin_headers)  # spends one of the admin's tokens
    for _ in range(BURST - 1):
        await call(client, "GET", "/tokens", admin_headers)
    await call(client, "GET", "/tokens", admin_headers, expect=429)
    resp, _ = await call(client, "GET", "/tokens", other)
    assert resp.headers["RateLimit-Remaining"] == str(BURST - 1)


async def test_failed_authentication_is_throttled_per_address(client, admin_headers):
    bodies = []
    for _ in range(3):
        resp, body = await call(client, "GET", "/tokens", {"SVC-API-KEY": "vg_wrong"},
                                expect=401)
        bodies.append(body)
    assert bodies[0] == bodies[1] == bodies[2]
    resp, problem = await call(client, "GET", "/tokens", {"SVC-API-KEY": "vg_wrong"},
                               expect=429)
    assert int(resp.headers["Retry-After"]) >= 1 and problem["type"].endswith("/rate-limited")
    # The address is throttled before any key is looked up, a valid one too.
    await call(client, "GET", "/tokens", admin_headers, expect=429)
    # Public routes stay open.
    await call(client, "GET", "/health", {})


async def test_rate_limit_zero_turns_limits_off(aiohttp_client, settings):
    from factories import new_tenant

    app = create_app(dataclasses.replace(settings, rate_limit=0, auth_failure_limit=0))
    client = await aiohttp_client(app)
    tenant = await new_tenant(app)
    for _ in range(5):
        resp, _ = await call(client, "GET", "/tokens", {"SVC-API-KEY": tenant.key})
        assert "RateLimit-Limit" not in resp.headers
    for _ in range(5):
        await call(client, "GET", "/tokens", {"SVC-API-KEY": "vg_wrong"}, expect=401)


async def test_concurrent_failed_authentications_spend_the_budget_before_the_look_up(
        client, admin_headers):
    # Each well-formed key is looked up in Neo4j. The budget was once checked before the
    # look-up and spent after the 401, so requests sent at once all passed the check: 40 of
    # them gave 40 answers of 401 against a budget of 3.
    keys = [apikeys.generate() for _ in range(40)]
    answers = await asyncio.gather(*(client.get("/tokens", headers={"SVC-API-KEY": k})
                                     for k in keys))
    statuses = sorted(r.status for r in answers)
    assert statuses == [401] * 3 + [429] * 37


async def test_concurrent_requests_with_a_valid_key_spend_no_failure_budget(
        aiohttp_client, settings):
    # Spending before the look-up must not refuse a burst of good requests from one address
    # (behind a proxy, every client's): they share one look-up and give the budget back.
    app = create_app(dataclasses.replace(settings, auth_failure_limit=3,
                                         auth_failure_window=3600.0))
    client = await aiohttp_client(app)
    tenant = await new_tenant(app)
    headers = {"SVC-API-KEY": tenant.key}
    for _ in range(3):
        answers = await asyncio.gather(*(client.get("/tokens", headers=headers)
                                         for _ in range(30)))
        assert {r.status for r in answers} == {200}
        app[services_key].authenticator.invalidate()  # the next burst looks the key up again
    await call(client, "GET", "/tokens", {"SVC-API-KEY": apikeys.generate()}, expect=401)


async def test_refusals_after_authentication_spend_the_bucket_and_carry_its_headers(
        client, admin_headers):
    """Issue #36: a 403 took nothing from the bucket and had no RateLimit-* headers, though
    each refusal writes an audit event (an application could fill the trail for free)."""
    reader = await application(client, admin_headers, permissions=["token:read"])
    seen = []
    for _ in range(BURST):
        resp, problem = await call(client, "POST", "/tokens", reader, json=card(), expect=403)
        assert problem["type"].endswith("/forbidden")
        seen.append((resp.headers["RateLimit-Limit"], resp.headers["RateLimit-Remaining"]))
    assert seen == [(str(BURST), str(BURST - n)) for n in range(1, BURST + 1)]
    # Over the limit, the next request is refused as such before its permission is looked at.
    resp, problem = await call(client, "POST", "/tokens", reader, json=card(), expect=429)
    assert problem["type"].endswith("/rate-limited")
    assert resp.headers["RateLimit-Remaining"] == "0" and int(resp.headers["Retry-After"]) >= 1
    await call(client, "GET", "/tokens", reader, expect=429)


async def test_every_refusal_of_an_authenticated_request_carries_the_headers(
        client, admin_headers):
    # A 404, a 400 and a 415: each spends one and says so.
    answers = [
        (await call(client, "GET", "/tokens/none", admin_headers, expect=404))[0],
        (await call(client, "POST", "/tokens", admin_headers, json={"type": "nope"},
                    expect=400))[0],
        await client.post("/tokens", data=b"x", headers={**admin_headers,
                                                         "Content-Type": "text/plain"}),
    ]
    assert answers[2].status == 415
    assert [r.headers["RateLimit-Remaining"] for r in answers] == \
        [str(BURST - 1), str(BURST - 2), str(BURST - 3)]
