"""`Idempotency-Key` on POST (docs/bulk-and-idempotency.md): the first response is kept and
replayed, another request under the key is 422, a key in flight is 409; entries are encrypted,
held by a uniqueness constraint and swept when expired."""

from __future__ import annotations

import asyncio
import math

import orjson
from factories import audit_tenant, audit_tokens, key_headers, make_application, wait_blocked
from tokens._support import ALL_TOKEN, rule

from vaultgraph.api.typedefs import services_key, settings_key

from ._support import MASTERCARD, VISA, application, call, card, cypher, token_count

KEY = "Idempotency-Key"


def keyed(headers: dict, key: str) -> dict:
    return {**headers, KEY: key}


async def pend(client, tenant, key: str, *, lapsed: bool, unwritten: bool = False) -> None:
    """Put the entry back in flight, as if its first request were still running (`lapsed`:
    its lease ran out; `unwritten`: its write never committed, so the entry is not marked)."""
    await cypher(client, "MATCH (k:IdempotencyKey {tenant_id: $t, key: $k}) "
                         "SET k.state = 'pending', "
                         "k.written = CASE WHEN $unwritten THEN null ELSE k.written END, "
                         "k.lease_until = datetime() + duration({seconds: $s})",
                 t=tenant.tenant_id, k=key, unwritten=unwritten, s=-1 if lapsed else 3600)


async def entry(client, tenant, key: str) -> dict:
    rows = await cypher(client, "MATCH (k:IdempotencyKey {tenant_id: $t, key: $k}) "
                                "RETURN properties(k) AS p", t=tenant.tenant_id, k=key)
    assert len(rows) == 1, rows
    return rows[0]["p"]


async def test_a_retry_replays_the_first_response(client, admin_headers, tenant):
    headers = keyed(admin_headers, "retry-1")
    first, created = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    again, replayed = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    assert replayed == created
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert again.content_type == "application/json"
    assert again.headers["Cache-Control"] == "no-store"
    assert await token_count(client, tenant.tenant_id) == 1


async def test_the_kept_response_is_encrypted_and_the_hash_keyed(client, admin_headers,
                                                                 tenant):
    await call(client, "POST", "/tokens", keyed(admin_headers, "enc-1"), json=card(VISA),
               expect=201)
    stored = await entry(client, tenant, "enc-1")
    assert stored["state"] == "done" and stored["status"] == 201
    assert VISA not in str(stored)
    assert stored["expires_at"].to_native() > stored["created_at"].to_native()


async def test_another_request_under_the_key_is_422(client, admin_headers, tenant):
    headers = keyed(admin_headers, "reused")
    await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    _, problem = await call(client, "POST", "/tokens", headers, json=card(MASTERCARD),
                            expect=422)
    assert MASTERCARD not in orjson.dumps(problem).decode()
    # Another route with the same body is another request too.
    await call(client, "POST", "/tokenize", headers, json=card(VISA), expect=422)
    assert await token_count(client, tenant.tenant_id) == 1


async def test_a_key_in_flight_is_409(client, admin_headers, tenant):
    headers = keyed(admin_headers, "in-flight")
    await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    await pend(client, tenant, "in-flight", lapsed=False)  # the first still running
    await call(client, "POST", "/tokens", headers, json=card(VISA), expect=409)
    # A lease that ran out after the first request's write committed (the write marked the
    # entry in its own transaction; its process died before the answer was kept): not run
    # again, and said so.
    await pend(client, tenant, "in-flight", lapsed=True)
    _, problem = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=409)
    assert "answer was lost" in problem["detail"]
    assert (await entry(client, tenant, "in-flight"))["state"] == "unanswered"
    assert await token_count(client, tenant.tenant_id) == 1
    # A lease that ran out before any write committed (the entry unmarked) is taken over: the
    # request runs again.
    await pend(client, tenant, "in-flight", lapsed=True, unwritten=True)
    await call(client, "POST", "/tokens", headers, json=card(MASTERCARD), expect=201)
    assert await token_count(client, tenant.tenant_id) == 2


async def test_a_key_in_flight_says_when_to_retry(client, admin_headers, tenant):
    """The in-flight 409 has a type of its own (a client tells it from the 409s that retrying
    does not change) and `Retry-After`: what is left of the first request's database time, or
    past that, of its claim's lease; at least 1 s, at most the request timeout."""
    budget = client.server.app[settings_key].request_timeout
    timeout = math.ceil(budget)
    headers = keyed(admin_headers, "in-flight-wait")
    await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)

    async def retry_after(*, age: float, lease: float) -> int:
        await cypher(client, "MATCH (k:IdempotencyKey {tenant_id: $t, key: $k}) "
                             "SET k.state = 'pending', "
                             "k.created_at = datetime() - duration({milliseconds: $age}), "
                             "k.lease_until = datetime() + duration({milliseconds: $lease})",
                     t=tenant.tenant_id, k="in-flight-wait", age=int(age * 1000),
                     lease=int(lease * 1000))
        resp, problem = await call(client, "POST", "/tokens", headers, json=card(VISA),
                                   expect=409)
        assert problem["type"] == "https://vaultgraph.dev/problems/idempotency-key-in-flight"
        assert "still being processed" in problem["detail"]
        return int(resp.headers["Retry-After"])

    assert await retry_after(age=0.0, lease=3600) == timeout  # just claimed: all of it left
    assert await retry_after(age=budget - 2.6, lease=3600) == 3  # 2.6 s left: 3
    # Past its database time: the lease's time left, within 1 and the request timeout.
    assert await retry_after(age=budget + 60, lease=2.6) == 3
    assert await retry_after(age=budget + 60, lease=3600) == timeout
    assert await retry_after(age=budget + 60, lease=0.2) == 1
    # The other 409s keep the plain type and no Retry-After: retrying them changes nothing.
    await pend(client, tenant, "in-flight-wait", lapsed=True)
    resp, problem = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=409)
    assert problem["type"] == "https://vaultgraph.dev/problems/conflict"
    assert "Retry-After" not in resp.headers


async def test_fifty_concurrent_retries_create_one_token(client, admin_headers, tenant):
    headers = keyed(admin_headers, "fifty")
    body = orjson.dumps(card(VISA))

    async def post():
        resp = await client.post("/tokens", data=body, headers={
            **headers, "Content-Type": "application/json"})
        return resp.status, resp.headers.get("Idempotent-Replayed"), await resp.read()

    results = await asyncio.gather(*(post() for _ in range(50)))
    firsts = [r for r in results if r[0] == 201 and r[1] is None]
    assert len(firsts) == 1
    assert all(r[0] == 409 or (r[0] == 201 and r[1] == "true" and r[2] == firsts[0][2])
               for r in results if r is not firsts[0]), {r[0] for r in results}
    assert await token_count(client, tenant.tenant_id) == 1


async def test_concurrent_retries_take_a_lapsed_claim_over_once(client, admin_headers, tenant):
    # A claim whose process died before any write (the entry unmarked), and two retries that
    # meet on it, held at the same point by a transaction on the entry: they decide one after
    # the other (the MERGE's lock on the key and the entry's own), so the second sees the
    # first's takeover and is a 409.
    headers = keyed(admin_headers, "lapsed")
    await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    await pend(client, tenant, "lapsed", lapsed=True, unwritten=True)
    body = orjson.dumps(card(VISA))

    async def post():
        resp = await client.post("/tokens", data=body, headers={
            **headers, "Content-Type": "application/json"})
        return resp.status

    db = client.server.app[services_key].database
    async with db.driver.session(database=db.database) as session:
        held = await session.begin_transaction()
        await held.run("MATCH (k:IdempotencyKey {tenant_id: $t, key: 'lapsed'}) "
                       "SET k.held = true", t=tenant.tenant_id)
        retries = [asyncio.ensure_future(post()) for _ in range(2)]
        try:  # until both retries wait on the held entry
            await wait_blocked(db, db.catalog.text("idempotency/claim"), count=2)
        finally:
            await held.commit()
        statuses = sorted(await asyncio.gather(*retries))
    assert statuses == [201, 409]
    assert await token_count(client, tenant.tenant_id) == 2  # the first, and one takeover


async def test_keys_are_bounded(client, admin_headers, tenant):
    for key in ("k" * 256, "has space", "caf\u00e9", ""):
        resp = await client.post("/tokens", json=card(VISA), headers={
            **admin_headers, KEY: key.encode().decode("latin-1")})
        assert resp.status == 400, key
        problem = await resp.json(content_type="application/problem+json")
        assert list(problem["errors"]) == [KEY]
    # 10 kB: past the server's header limit, refused by the HTTP parser before any handler.
    resp = await client.post("/tokens", json=card(VISA), headers=keyed(admin_headers,
                                                                        "k" * 10_240))
    assert resp.status == 400
    assert await token_count(client, tenant.tenant_id) == 0
    assert await cypher(client, "MATCH (k:IdempotencyKey {tenant_id: $t}) RETURN k",
                        t=tenant.tenant_id) == []


async def test_a_failed_request_gives_its_key_back(client, admin_headers):
    headers = keyed(admin_headers, "failed-first")
    await call(client, "POST", "/tokens", headers, json={"type": "card"}, expect=400)
    # Not a 422: the failed request kept nothing, so this one runs as the first …
    first, _ = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    # … and is the one kept.
    again, _ = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"


async def test_keys_are_per_application(client, admin_headers, tenant):
    other = await application(client, admin_headers, name="other")
    for headers, body in ((admin_headers, card(VISA)), (other, card(MASTERCARD))):
        _, created = await call(client, "POST", "/tokens", keyed(headers, "shared"), json=body,
                                expect=201)
        again, replayed = await call(client, "POST", "/tokens", keyed(headers, "shared"),
                                     json=body, expect=201)
        assert again.headers["Idempotent-Replayed"] == "true" and replayed == created
    assert await token_count(client, tenant.tenant_id) == 2


async def test_tokenize_replays_too(client, admin_headers, tenant):
    headers = keyed(admin_headers, "bulk-1")
    _, first = await call(client, "POST", "/tokenize", headers, json=[card(VISA)])
    again, second = await call(client, "POST", "/tokenize", headers, json=[card(VISA)])
    assert second == first and again.headers["Idempotent-Replayed"] == "true"
    assert await token_count(client, tenant.tenant_id) == 1


async def test_expired_entries_are_swept_and_taken_over(client, admin_headers, tenant):
    headers = keyed(admin_headers, "old")
    await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    await cypher(client, "MATCH (k:IdempotencyKey {tenant_id: $t, key: 'old'}) "
                         "SET k.expires_at = datetime() - duration('PT1S')", t=tenant.tenant_id)
    # Not swept yet: an expired entry is taken over, the request runs again.
    resp, _ = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    assert "Idempotent-Replayed" not in resp.headers
    assert await token_count(client, tenant.tenant_id) == 2
    await cypher(client, "MATCH (k:IdempotencyKey {tenant_id: $t, key: 'old'}) "
                         "SET k.expires_at = datetime() - duration('PT1S')", t=tenant.tenant_id)
    await client.server.app[services_key].expiry.sweep()
    assert await cypher(client, "MATCH (k:IdempotencyKey {tenant_id: $t, key: 'old'}) RETURN k",
                        t=tenant.tenant_id) == []


async def test_reads_run_again_and_show_nothing_of_a_deleted_token(client, admin_headers, tenant):
    # POST /detokenize and /tokens/search change nothing: they ignore the key, so a retry
    # after the token is deleted finds no token, and nothing revealed is kept.
    _, token = await call(client, "POST", "/tokens", admin_headers, json=card(VISA), expect=201)
    read = keyed(admin_headers, "read-1")
    payload = orjson.dumps({"card": f"{{{{ {token['id']} }}}}"})
    first, shown = await call(client, "POST", "/detokenize", read, data=payload)
    assert "Idempotent-Replayed" not in first.headers and shown["card"]
    query = {"query": f'id:"{token["id"]}"'}
    _, found = await call(client, "POST", "/tokens/search", keyed(admin_headers, "search-1"),
                          json=query)
    assert [t["id"] for t in found["data"]] == [token["id"]]
    assert await cypher(client, "MATCH (k:IdempotencyKey {tenant_id: $t}) "
                                "WHERE k.key IN ['read-1', 'search-1'] RETURN k",
                        t=tenant.tenant_id) == []
    await call(client, "DELETE", f"/tokens/{token['id']}", admin_headers, expect=204)
    again, problem = await call(client, "POST", "/detokenize", read, data=payload, expect=400)
    assert "Idempotent-Replayed" not in again.headers and VISA not in orjson.dumps(problem).decode()
    _, found = await call(client, "POST", "/tokens/search", keyed(admin_headers, "search-1"),
                          json=query)
    assert found["data"] == []


async def test_a_replay_of_a_new_api_key_answers_without_the_key(client, admin_headers):
    body = {"name": "replayed", "permissions": ["token:read"]}
    headers = keyed(admin_headers, "app-1")
    _, created = await call(client, "POST", "/applications", headers, json=body, expect=201)
    again, replayed = await call(client, "POST", "/applications", headers, json=body, expect=201)
    assert created["key"].startswith("vg_") and again.headers["Idempotent-Replayed"] == "true"
    assert "key" not in replayed and replayed == {k: v for k, v in created.items() if k != "key"}
    path = f"/applications/{created['id']}/keys"
    _, issued = await call(client, "POST", path, keyed(admin_headers, "key-1"), expect=201)
    again, replayed = await call(client, "POST", path, keyed(admin_headers, "key-1"), expect=201)
    assert issued["key"].startswith("vg_") and "key" not in replayed
    assert again.headers["Idempotent-Replayed"] == "true"
    # A replay is the kept answer decrypted: that it lacks the key shows the key was not kept.


async def test_a_replay_s_audit_event_names_what_the_first_answer_showed(
        client, admin_headers, tenant):
    headers = keyed(admin_headers, "audited-replay")
    first, created = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    again, _ = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    assert again.headers["Idempotent-Replayed"] == "true"
    await client.server.app[services_key].audit_writer.settle()
    events = {}
    for resp in (first, again):
        [row] = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr, "
                                     "trace_id: $trace}) RETURN properties(e) AS p",
                             **audit_tenant(tenant.tenant_id), trace=resp.headers["SVC-TRACE-ID"])
        events[resp is again] = row["p"]
    # One token: held as the indexed scalar alone (no list of one).
    assert audit_tokens(events[False]) == audit_tokens(events[True]) == [created["id"]]
    assert "token_key" in events[False] and "token_key" in events[True]
    assert "token_ids" not in events[False] and "token_ids" not in events[True]
    assert events[False]["transform"] and events[True]["transform"] == events[False]["transform"]


async def test_a_replay_never_shows_a_token_deleted_or_changed_since(client, admin_headers,
                                                                      tenant):
    # The kept answer holds the token's revealed data; once the token is deleted (its data
    # removed permanently) or changed, the answer is not shown again, nor run again.
    for key, change in (("gone", "DELETE"), ("changed", "PATCH")):
        headers = keyed(admin_headers, key)
        body = {"type": "card", "data": {"number": VISA, "cvc": "123"}}
        _, created = await call(client, "POST", "/tokens", headers, json=body, expect=201)
        again, replayed = await call(client, "POST", "/tokens", headers, json=body, expect=201)
        assert again.headers["Idempotent-Replayed"] == "true" and replayed == created
        path = f"/tokens/{created['id']}"
        if change == "DELETE":
            await call(client, "DELETE", path, admin_headers, expect=204)
        else:
            resp = await client.patch(path, data=orjson.dumps({"metadata": {"a": "b"}}),
                                      headers={**admin_headers,
                                               "Content-Type": "application/merge-patch+json"})
            assert resp.status == 200
        again, problem = await call(client, "POST", "/tokens", headers, json=body, expect=409)
        assert "Idempotent-Replayed" not in again.headers
        assert "since changed or been deleted" in problem["detail"]
        assert VISA not in orjson.dumps(problem).decode()
    assert await token_count(client, tenant.tenant_id) == 1  # the changed one


async def test_a_replay_never_outlives_a_narrowed_rule(client, admin_headers, tenant):
    created_app = await make_application(client, admin_headers, permissions=ALL_TOKEN,
                                         rules=[rule("/", "reveal")], name="narrowed")
    headers = keyed(key_headers(created_app), "narrow-1")
    _, first = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    assert first["data"]["number"] == VISA
    again, _ = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=201)
    assert again.headers["Idempotent-Replayed"] == "true"
    resp = await client.put(f"/applications/{created_app['id']}",
                            json={"name": "narrowed", "permissions": ALL_TOKEN,
                                  "rules": [rule("/", "mask")]}, headers=admin_headers)
    assert resp.status == 200, await resp.text()
    _, problem = await call(client, "POST", "/tokens", headers, json=card(VISA), expect=409)
    assert VISA not in orjson.dumps(problem).decode()
    assert await token_count(client, tenant.tenant_id) == 1


async def test_a_dedup_answer_replays(client, admin_headers, tenant):
    # The answer names the existing token, not the id the request would have made: the replay
    # is the kept answer (the never-made id is no change).
    await call(client, "POST", "/tokens", admin_headers, json=card(VISA), expect=201)
    headers = keyed(admin_headers, "dedup-1")
    body = card(VISA, deduplicate_token=True)
    _, first = await call(client, "POST", "/tokens", headers, json=body, expect=200)
    again, replayed = await call(client, "POST", "/tokens", headers, json=body, expect=200)
    assert again.headers["Idempotent-Replayed"] == "true" and replayed == first
    tokenized = keyed(admin_headers, "dedup-bulk")
    _, first = await call(client, "POST", "/tokenize", tokenized, json=[body, card(MASTERCARD)])
    again, replayed = await call(client, "POST", "/tokenize", tokenized,
                                 json=[body, card(MASTERCARD)])
    assert again.headers["Idempotent-Replayed"] == "true" and replayed == first
    assert await token_count(client, tenant.tenant_id) == 2


async def test_a_204_replays_and_a_refusal_runs_again(client, admin_headers, tenant):
    _, parent = await call(client, "POST", "/tokens", admin_headers, json=card(VISA), expect=201)
    _, child = await call(client, "POST", "/tokens", admin_headers, json=card(MASTERCARD),
                          expect=201)
    path = f"/tokens/{parent['id']}/children/{child['id']}"
    await call(client, "POST", path, admin_headers, expect=201)
    headers = keyed(admin_headers, "linked")
    resp = await client.post(path, headers=headers)
    assert resp.status == 204
    again = await client.post(path, headers=headers)
    assert again.status == 204 and again.headers["Idempotent-Replayed"] == "true"
    # A 404 raised after the link statement ran (it changed nothing): the key is given back,
    # so the retry runs again (a 404 again, not a 409 "carried out").
    missing = keyed(admin_headers, "missing")
    gone = f"/tokens/{parent['id']}/children/no-such-token"
    await call(client, "POST", gone, missing, expect=404)
    again, _ = await call(client, "POST", gone, missing, expect=404)
    assert "Idempotent-Replayed" not in again.headers
