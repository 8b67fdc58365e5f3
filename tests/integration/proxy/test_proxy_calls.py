"""Calls through the outbound proxy (docs/proxy.md) on the real stack: what the destination
receives, what the caller gets back, and what is refused before anything is sent."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import orjson
import pytest
from factories import audit_tenant, audit_tokens, database

from ._support import (
    app_headers,
    create_proxy,
    create_token,
    cypher,
    get_tail_as_sent,
    json_of,
    start_destination,
)

CANARY = "4242424242424242"


@pytest.fixture
def settings(settings):
    """http and 127.0.0.1 allowed: the destination is a local server."""
    return dataclasses.replace(settings, webhook_allow_http=True,
                               webhook_allowed_networks="127.0.0.1/32")


@pytest.fixture
async def destination(aiohttp_server):
    return await start_destination(aiohttp_server)


@pytest.fixture
async def proxy(client, admin_headers, destination):
    return await create_proxy(client, admin_headers, destination.base + "/v1",
                              header_allowlist=["Authorization"])


def proxied(proxy: dict, tail: str = "charges") -> str:
    return f"/proxy/{proxy['id']}/{tail}"


async def test_json_form_and_text_bodies_carry_the_tokens_data(
        client, admin_headers, destination, proxy):
    number = await create_token(client, admin_headers, CANARY, type="card_number")
    card = await create_token(client, admin_headers, {"number": CANARY, "expiration_month": 12,
                                                      "expiration_year": 2030}, type="card")
    resp = await client.post(proxied(proxy) + "?capture=true", headers=admin_headers, json={
        "amount": 1250, "card": f"{{{{ {card} }}}}", "last4": f"{{{{ {number} | last4 }}}}",
        "memo": f"pan {{{{ {number} }}}} end"})
    assert resp.status == 201
    assert resp.headers["SVC-PROXY-STATUS"] == "forwarded"
    assert resp.headers["Content-Type"].startswith("application/json")
    [seen] = destination.requests
    assert (seen["method"], seen["path"]) == ("POST", "/v1/charges?capture=true")
    sent = {"amount": 1250, "card": {"number": CANARY, "expiration_month": 12,
                                     "expiration_year": 2030},
            "last4": CANARY[-4:], "memo": f"pan {CANARY} end"}
    assert json_of(seen) == sent
    assert orjson.loads(await resp.read()) == sent   # the destination's answer, passed back
    # served from the vault's origin, never sniffed or run as a page there
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"

    resp = await client.put(proxied(proxy, "forms/1"), headers=admin_headers,
                            data={"pan": f"{{{{ {number} }}}}", "note": "a&b=c"})
    assert resp.status == 201
    assert destination.requests[-1]["body"] == f"pan={CANARY}&note=a%26b%3Dc".encode()

    resp = await client.post(proxied(proxy, "text"), data=f"PAN={{{{ {number} }}}};".encode(),
                             headers={**admin_headers, "Content-Type": "text/plain"})
    assert resp.status == 201
    assert destination.requests[-1]["body"] == f"PAN={CANARY};".encode()
    assert (await resp.read()) == f"PAN={CANARY};".encode()


async def test_a_masked_reader_with_token_use_sends_the_real_value(
        client, admin_headers, destination, proxy):
    number = await create_token(client, admin_headers, CANARY, type="card_number")
    caller = await app_headers(client, admin_headers, {
        "container": "/pci/", "transform": "mask", "permissions": ["token:read", "token:use"]},
        permissions=["token:read", "token:use"])
    shown = await (await client.get(f"/tokens/{number}", headers=caller)).json()
    assert shown["data"] != CANARY and CANARY not in orjson.dumps(shown).decode()
    resp = await client.post(proxied(proxy), headers=caller, json={"pan": f"{{{{ {number} }}}}"})
    assert resp.status == 201
    assert json_of(destination.requests[-1]) == {"pan": CANARY}


async def test_without_token_use_nothing_is_sent(client, admin_headers, destination, proxy):
    number = await create_token(client, admin_headers, CANARY, type="card_number")
    reader = await app_headers(client, admin_headers, permissions=["token:read"])
    resp = await client.post(proxied(proxy), headers=reader, json={"pan": f"{{{{ {number} }}}}"})
    assert resp.status == 403
    assert destination.requests == []


async def test_unknown_foreign_and_unusable_tokens_answer_alike_and_nothing_is_sent(
        client, admin_headers, destination, proxy, aiohttp_client, app):
    from factories import new_tenant

    usable = await create_token(client, admin_headers, CANARY, type="card_number")
    outside = await create_token(client, admin_headers, "general-secret")  # /general/high/
    other = await new_tenant(client.server.app, "other")
    foreign = await create_token(client, {"SVC-API-KEY": other.key}, "theirs")
    caller = await app_headers(client, admin_headers, {
        "container": "/pci/", "transform": "redact", "permissions": ["token:use"]},
        permissions=["token:use"])
    answers = []
    for token_id in (outside, foreign, "no-such-token"):
        resp = await client.post(proxied(proxy), headers=caller,
                                 json={"ok": f"{{{{ {usable} }}}}", "x": f"{{{{ {token_id} }}}}"})
        body = await resp.json()
        assert resp.status == 400
        answers.append((body["detail"], body["errors"]))
    assert answers[0] == answers[1] == answers[2] == (
        "Some token expressions name no token the application may use.",
        {"x": ["names no token the application may use"]})
    assert destination.requests == []
    resp = await client.post(proxied(proxy), headers=caller, json={"ok": f"{{{{ {usable} }}}}"})
    assert resp.status == 201 and json_of(destination.requests[-1]) == {"ok": CANARY}


@pytest.mark.parametrize("body", [
    {"a": "{{ x"}, {"a": "{{ {{ x }} }}"}, {"a": "{{ x | }}"}, {"a": "{{ x | no_such_filter }}"}])
async def test_bad_expressions_are_400s_and_nothing_is_sent(
        client, admin_headers, destination, proxy, body):
    resp = await client.post(proxied(proxy), headers=admin_headers, json=body)
    assert resp.status == 400
    assert list((await resp.json())["errors"]) == ["a"]
    assert destination.requests == []


async def test_at_most_100_expressions(client, admin_headers, destination, proxy):
    number = await create_token(client, admin_headers, CANARY, type="card_number")
    resp = await client.post(proxied(proxy), headers=admin_headers,
                             json=[f"{{{{ {number} }}}}"] * 101)
    assert resp.status == 400
    assert (await resp.json())["errors"] == {"body": ["must hold at most 100 token expressions"]}
    resp = await client.post(proxied(proxy), headers=admin_headers,
                             json=[f"{{{{ {number} }}}}"] * 100)
    assert resp.status == 201
    assert json_of(destination.requests[-1]) == [CANARY] * 100


async def test_expressions_in_a_body_of_another_type_are_refused(
        client, admin_headers, destination, proxy):
    resp = await client.post(proxied(proxy), data=b"\x00{{ t }}",
                             headers={**admin_headers, "Content-Type": "image/png"})
    assert resp.status == 400
    resp = await client.post(proxied(proxy), data=b"\x89PNG",
                             headers={**admin_headers, "Content-Type": "image/png"})
    assert resp.status == 201 and destination.requests[-1]["body"] == b"\x89PNG"


@pytest.mark.parametrize("tail", [
    "..", "a/../..", "%2e%2e", "%2E%2e/x", ".%2e/x", "a/%2e%2e/%2e%2e/tokens", "a%2fb",
    "a%2F..%2Fb", "%252e%252e/x", "/evil.example/x", "a//b", "https:%2f%2fevil.example/",
    "https://evil.example/x", "%5c..%5cx", ".", "a/./b"])
async def test_the_path_cannot_climb_out_of_the_destination(
        client, admin_headers, destination, proxy, tail):
    status, errors = await get_tail_as_sent(client, admin_headers, proxy["id"], tail)
    assert (status, list(errors or ())) == (400, ["path"])
    assert destination.requests == []


async def test_the_callers_key_cookies_and_hop_by_hop_headers_stay_behind(
        client, admin_headers, destination, proxy):
    number = await create_token(client, admin_headers, CANARY, type="card_number")
    resp = await client.get(proxied(proxy, "h"), headers={
        **admin_headers, "Cookie": "session=1", "Connection": "keep-alive, X-Hop",
        "X-Hop": "1", "Keep-Alive": "timeout=5", "Proxy-Authorization": "Basic eA==",
        "TE": "trailers", "SVC-TRACE-ID": "t-1", "X-Custom": "kept",
        "Authorization": f"Bearer {{{{ {number} }}}}", "Idempotency-Key": "idem-1"})
    assert resp.status == 201
    headers = destination.requests[-1]["headers"]
    for name in ("SVC-API-KEY", "Cookie", "X-Hop", "Keep-Alive", "Proxy-Authorization", "TE",
                 "SVC-TRACE-ID"):
        assert name not in headers, name
    assert headers["Host"] == destination.base.removeprefix("http://")
    assert headers["X-Custom"] == "kept" and headers["Idempotency-Key"] == "idem-1"
    assert headers["Authorization"] == f"Bearer {CANARY}"


async def test_the_answer_is_the_destinations_status_body_and_content_type_only(
        client, admin_headers, destination, proxy):
    resp = await client.get(proxied(proxy, "teapot"), headers=admin_headers)
    assert resp.status == 418
    assert await resp.text() == "short and stout"
    assert resp.headers["Content-Type"].startswith("text/plain")
    assert resp.headers["SVC-PROXY-STATUS"] == "forwarded"
    assert "Set-Cookie" not in resp.headers and "X-Secret-Header" not in resp.headers


async def test_an_unreachable_destination_is_a_502_naming_the_proxy(client, admin_headers):
    from factories import free_port

    dead = await create_proxy(client, admin_headers, f"http://127.0.0.1:{free_port()}")
    resp = await client.post(proxied(dead), headers=admin_headers, json={"secret": CANARY})
    body = await resp.json()
    assert resp.status == 502
    assert body["detail"] == f"Proxy {dead['id']}: its destination could not be reached."
    assert CANARY not in orjson.dumps(body).decode()


async def test_an_answer_over_1_mb_is_a_502(client, admin_headers, destination, proxy):
    resp = await client.get(proxied(proxy, "huge"), headers=admin_headers)
    assert resp.status == 502
    assert (await resp.json())["detail"].endswith("answer is larger than 1048576 bytes.")


async def test_a_deleted_proxy_is_a_404(client, admin_headers, destination, proxy):
    assert (await client.delete(f"/proxies/{proxy['id']}", headers=admin_headers)).status == 204
    resp = await client.post(proxied(proxy), headers=admin_headers, json={})
    assert resp.status == 404
    assert destination.requests == []


async def test_one_audit_event_per_call(client, admin_headers, destination, proxy, tenant):
    number = await create_token(client, admin_headers, CANARY, type="card_number")
    other = await create_token(client, admin_headers, "4000056655665556", type="card_number")
    await client.post(proxied(proxy, "teapot"), headers=admin_headers,
                      json={"a": f"{{{{ {number} }}}}", "b": f"{{{{ {other} | last4 }}}}"})
    await client.post(proxied(proxy), headers=admin_headers, json={"a": "{{ missing-one }}"})
    rows = [{"route": r["route"], "ids": audit_tokens(r["p"]), "status": r["status"],
             "reason": r["reason"]}
            for r in await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: "
                                          "$tr, operation: 'token:use'}) RETURN e.route AS route, "
                                          "properties(e) AS p, e.status AS status, "
                                          "e.reason AS reason ORDER BY e.at",
                                  **audit_tenant(tenant.tenant_id))]
    route = f"POST /proxy/{proxy['id']}/{{path}}"
    assert rows == [{"route": route, "ids": [number, other], "status": 418,
                     "reason": "forwarded"},
                    {"route": route, "ids": ["missing-one"], "status": 400,
                     "reason": "validation"}]


async def test_100_concurrent_calls_lose_nothing_and_mix_nothing_up(
        client, admin_headers, destination, proxy):
    resp = await client.post("/tokenize", headers=admin_headers, json=[
        {"type": "token", "data": f"value-{i:03d}-{uuid.uuid4().hex}"} for i in range(100)])
    tokens = await resp.json()
    assert resp.status == 200
    values = [t["data"] for t in tokens]

    async def one(i: int):
        r = await client.post(proxied(proxy, f"slow-echo/{i}"), headers=admin_headers,
                              json={"i": i, "v": f"{{{{ {tokens[i]['id']} }}}}"})
        return r.status, orjson.loads(await r.read())

    answers = await asyncio.gather(*(one(i) for i in range(100)))
    assert answers == [(201, {"i": i, "v": values[i]}) for i in range(100)]
    received = sorted((int(r["path"].rsplit("/", 1)[1]), json_of(r))
                      for r in destination.requests)
    assert received == [(i, {"i": i, "v": values[i]}) for i in range(100)]


async def test_an_idempotency_key_is_the_destinations_never_replayed_by_the_vault(
        client, admin_headers, destination, proxy):
    headers = {**admin_headers, "Idempotency-Key": "pay-1"}
    for _ in range(2):
        resp = await client.post(proxied(proxy), headers=headers, json={"a": 1})
        assert resp.status == 201 and "Idempotent-Replayed" not in resp.headers
    assert [r["headers"]["Idempotency-Key"] for r in destination.requests] == ["pay-1", "pay-1"]


async def test_a_long_query_is_forwarded_as_it_is(client, admin_headers, destination, proxy):
    query = "q=" + "a" * 4000
    resp = await client.get(proxied(proxy) + "?" + query, headers=admin_headers)
    assert resp.status == 201
    assert destination.requests[-1]["path"] == "/v1/charges?" + query


async def _reads_during(client, monkeypatch, call) -> tuple[list[str], object]:
    """The catalog statements the app read through its database while `call` ran (each still
    sent to the real Neo4j), and the call's answer."""
    db = database(client.server.app)
    names: list[str] = []
    real = db.read

    async def read(name, **params):
        names.append(name)
        return await real(name, **params)

    monkeypatch.setattr(db, "read", read)
    try:
        resp = await call()
    finally:
        monkeypatch.setattr(db, "read", real)
    return names, resp


async def test_the_proxy_and_its_tokens_are_read_together_before_the_call(
        client, admin_headers, destination, proxy, monkeypatch):
    card = await create_token(client, admin_headers, CANARY, type="card_number")
    other = await create_token(client, admin_headers, "4000056655665556", type="card_number")
    await client.get(f"/proxies/{proxy['id']}", headers=admin_headers)  # the key is cached now
    names, resp = await _reads_during(client, monkeypatch, lambda: client.post(
        proxied(proxy), headers={**admin_headers, "Authorization": f"Bearer {{{{ {other} }}}}"},
        json={"pan": f"{{{{ {card} }}}}", "last4": f"{{{{ {card} | last4 }}}}"}))
    assert resp.status == 201, await resp.text()
    assert names == ["proxies/call"]  # one read: no second round trip for the tokens
    [seen] = destination.requests
    assert json_of(seen) == {"pan": CANARY, "last4": CANARY[-4:]}
    assert seen["headers"]["Authorization"] == "Bearer 4000056655665556"


async def test_tokens_hidden_from_the_first_read_are_read_after_it(
        client, admin_headers, destination, proxy, monkeypatch):
    card = await create_token(client, admin_headers, CANARY, type="card_number")
    await client.get(f"/proxies/{proxy['id']}", headers=admin_headers)
    # A form body percent-encodes the braces, so the raw text names no token: the tokens the
    # parsed body names are read after the proxy.
    names, resp = await _reads_during(client, monkeypatch, lambda: client.post(
        proxied(proxy), headers=admin_headers, data={"pan": f"{{{{ {card} }}}}"}))
    assert resp.status == 201, await resp.text()
    assert names == ["proxies/call", "tokens/list_by_ids"]
    [seen] = destination.requests
    assert seen["body"] == f"pan={CANARY}".encode()


async def test_a_json_body_keeps_every_byte_but_the_expressions(
        client, admin_headers, destination, proxy):
    card = await create_token(client, admin_headers, {"number": CANARY, "expiration_month": 1,
                                                      "expiration_year": 2030}, type="card")
    number = await create_token(client, admin_headers, CANARY, type="card_number")
    body = ('{ "amount" : 12.50, "rate": 1.0e2, "n": -0.0, "card":"{{ CARD }}",\n'
            ' "memo": ["pan \\u007b{ NUMBER | last4 }} \\"quoted\\"", "{{ not"],\n'
            ' "{{ NUMBER }}": "a key stays" }').replace("CARD", card).replace("NUMBER", number)
    resp = await client.post(proxied(proxy), data=body.encode(),
                             headers={**admin_headers, "Content-Type": "application/json"})
    assert resp.status == 400  # "{{ not" starts no expression: nothing is sent
    assert destination.requests == []
    body = body.replace('"{{ not"', '"plain"')
    resp = await client.post(proxied(proxy), data=body.encode(),
                             headers={**admin_headers, "Content-Type": "application/json"})
    assert resp.status == 201, await resp.text()
    [seen] = destination.requests
    sent = ('{ "amount" : 12.50, "rate": 1.0e2, "n": -0.0, "card":{"expiration_month":1,'
            f'"expiration_year":2030,"number":"{CANARY}"}},\n'
            f' "memo": ["pan {CANARY[-4:]} \\"quoted\\"", "plain"],\n'
            ' "{{ NUMBER }}": "a key stays" }').replace("NUMBER", number)
    assert seen["body"].decode() == sent


@pytest.mark.parametrize("raw", [
    '{"a": "{{ ID }}", "a": "x"}', '{"a": "x", "a": "{{ ID }}"}',
    '{"ok": "{{ USABLE }}", "b": {"a": "\\u007b{ ID }}", "a": 1}}',
    '[{"a": 1, "a": 1}, "{{ USABLE }}"]'])
async def test_a_json_body_that_repeats_a_key_is_refused_and_nothing_is_sent(
        client, admin_headers, destination, proxy, tenant, raw):
    # A parser keeps one of the repeated values: the vault would check the expressions of the
    # one it kept and forward the other as it was, unchecked. So the body is refused whole.
    usable = await create_token(client, admin_headers, CANARY, type="card_number")
    outside = await create_token(client, admin_headers, "general-secret")  # /general/high/
    caller = await app_headers(client, admin_headers, {
        "container": "/pci/", "transform": "redact", "permissions": ["token:use"]},
        permissions=["token:use"])
    for token_id in ("no-such-token", outside):
        body = raw.replace("USABLE", usable).replace("ID", token_id)
        resp = await client.post(proxied(proxy, "dup"), data=body.encode(),
                                 headers={**caller, "Content-Type": "application/json"})
        assert resp.status == 400, await resp.text()
        assert (await resp.json())["errors"] == {"body": ["must not repeat a key in an object"]}
    assert destination.requests == []
    resp = await client.post(proxied(proxy, "dup"), headers=caller,
                             json={"a": f"{{{{ {usable} }}}}", "b": {"a": 1}})  # no repeat
    assert resp.status == 201 and json_of(destination.requests[-1]) == {
        "a": CANARY, "b": {"a": 1}}
    # Without `{{` nothing in a body is replaced: it goes as sent, repeats and all.
    resp = await client.post(proxied(proxy, "dup"), data=b'{"a": 1, "a": 2}',
                             headers={**caller, "Content-Type": "application/json"})
    assert resp.status == 201 and destination.requests[-1]["body"] == b'{"a": 1, "a": 2}'


@pytest.mark.parametrize(("tail", "message"), [
    ("charges/{{%20tok%20}}", "must not hold `{{`: token expressions are replaced in the body "
                              "and in the headers the proxy allows, never in the path"),
    ("charges/%7B%7B%20tok%20%7D%7D", "must not hold `{{`: token expressions are replaced in "
                                      "the body and in the headers the proxy allows, never in "
                                      "the path"),
    ("charges/{id}", "may hold only the characters a URL path allows as they are (letters, "
                     "digits and -._~!$&'()*+,;=:@), any other percent-encoded (`{` as `%7B`)"),
    ("a|b", "may hold only the characters a URL path allows as they are (letters, digits and "
            "-._~!$&'()*+,;=:@), any other percent-encoded (`{` as `%7B`)"),
    ("a%zz", "may use `%` only to start a percent-escape: `%` and two hexadecimal digits"),
])
async def test_a_path_refused_for_its_characters_is_told_why(
        client, admin_headers, destination, proxy, tail, message):
    status, errors = await get_tail_as_sent(client, admin_headers, proxy["id"], tail)
    assert (status, errors) == (400, {"path": [message]})
    assert destination.requests == []
    status, _ = await get_tail_as_sent(client, admin_headers, proxy["id"], "charges/%7Bid%7D")
    assert status == 201 and destination.requests[-1]["path"] == "/v1/charges/%7Bid%7D"
