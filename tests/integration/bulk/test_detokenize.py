"""POST /detokenize (docs/bulk-and-idempotency.md): token expressions in any JSON, replaced by
token data as the caller may see it; one 400 for unknown and unreadable ids alike."""

from __future__ import annotations

import orjson
from factories import audit_tenant, audit_tokens, new_tenant

from vaultgraph.audit.ids import route_number
from vaultgraph.errors import MAX_FIELD_NAME, MAX_LISTED_ERRORS

from ._support import MASTERCARD, VISA, application, call, card, cypher, rule


async def create(client, headers, body) -> str:
    _, token = await call(client, "POST", "/tokens", headers, json=body, expect=201)
    return token["id"]


async def detokenize(client, headers, payload, expect=200):
    return (await call(client, "POST", "/detokenize", headers, data=orjson.dumps(payload),
                       expect=expect))[1]


async def test_expressions_are_replaced_and_everything_else_kept(client, admin_headers):
    visa = await create(client, admin_headers, card(VISA))
    pan = await create(client, admin_headers, {"type": "card_number", "data": VISA})
    name = await create(client, admin_headers, {"type": "token", "data": {"first": "Ada"}})
    payload = {"card": {"number": f"{{{{ {visa} }}}}", "last4": f"{{{{{pan}|last4}}}}"},
               "holder": [f"{{{{ {name} }}}}", 7, None, True, "plain text"], "amount": 12.5}
    out = await detokenize(client, admin_headers, payload)
    assert out == {"card": {"number": {"number": VISA}, "last4": VISA[-4:]},
                   "holder": [{"first": "Ada"}, 7, None, True, "plain text"], "amount": 12.5}


async def test_a_whole_payload_can_be_one_expression(client, admin_headers):
    token = await create(client, admin_headers, {"type": "token", "data": "secret"})
    assert await detokenize(client, admin_headers, f"{{{{ {token} }}}}") == "secret"
    assert await detokenize(client, admin_headers, {"no": "expressions"}) == {"no": "expressions"}


async def test_data_is_shown_under_the_callers_transform(client, admin_headers):
    visa = await create(client, admin_headers, card(VISA))
    masking = await application(client, admin_headers, rule("/", "mask"))
    redacting = await application(client, admin_headers, rule("/", "redact"), name="r")
    masked = await detokenize(client, masking, {"n": f"{{{{ {visa} }}}}"})
    assert masked == {"n": {"number": "424242XXXXXX4242"}}
    # Filters apply to what the caller may see, never to the plaintext behind a mask.
    last = await detokenize(client, masking, {"n": f"{{{{ {visa} | json }}}}"})
    assert VISA not in last["n"]
    assert await detokenize(client, redacting, {"n": f"{{{{ {visa} }}}}"}) == {"n": None}


async def test_unknown_foreign_and_unreadable_ids_answer_alike(client, admin_headers):
    visa = await create(client, admin_headers, card(VISA))
    bank_only = await application(client, admin_headers, rule("/bank/", "reveal"))
    other = await new_tenant(client.server.app, "other")
    foreign = await create(client, {"SVC-API-KEY": other.key}, card(MASTERCARD))
    answers = [
        await detokenize(client, bank_only, {"x": f"{{{{ {visa} }}}}"}, expect=400),
        await detokenize(client, admin_headers, {"x": "{{ no-such-token }}"}, expect=400),
        await detokenize(client, admin_headers, {"x": f"{{{{ {foreign} }}}}"}, expect=400)]
    assert answers[0] == answers[1] == answers[2]
    assert answers[0]["errors"] == {"x": ["names no token the application may read"]}


async def test_every_failing_expression_is_listed(client, admin_headers):
    visa = await create(client, admin_headers, card(VISA))
    problem = await detokenize(client, admin_headers, {
        "ok": f"{{{{ {visa} }}}}", "gone": ["{{ missing-1 }}", "{{ missing-2 | last4 }}"]},
        expect=400)
    assert set(problem["errors"]) == {"gone.0", "gone.1"}


async def test_nested_partial_and_bad_expressions_are_400s(client, admin_headers):
    visa = await create(client, admin_headers, card(VISA))
    problem = await detokenize(client, admin_headers, {
        "nested": f"{{{{ {{{{ {visa} }}}} }}}}", "partial": f"Card {{{{ {visa} }}}}",
        "open": "{{ abc", "filter": f"{{{{ {visa} | no_such_filter }}}}",
        "empty": f"{{{{ {visa} | }}}}", "fine": f"{{{{ {visa} }}}}"}, expect=400)
    assert set(problem["errors"]) == {"nested", "partial", "open", "filter", "empty"}
    assert VISA not in orjson.dumps(problem).decode()


async def test_limits_are_400s(client, admin_headers):
    problem = await detokenize(client, admin_headers,
                               [f"{{{{ t-{i} }}}}" for i in range(101)], expect=400)
    assert list(problem["errors"]) == ["body"]
    deep: object = "x"
    for _ in range(70):
        deep = [deep]
    problem = await detokenize(client, admin_headers, deep, expect=400)
    assert list(problem["errors"]) == ["body"]
    await call(client, "POST", "/detokenize", admin_headers, data=b"{not json",
                         expect=400)


async def test_an_integer_beyond_64_bits_is_400_not_sent_back_changed(client, admin_headers):
    # orjson reads it as a float: the payload came back with 9.876543210987654e+19 in it.
    for body, place in ((b'{"amount": [98765432109876543210]}', "amount.0"),
                        (b"-9223372036854775809", "body")):
        _, problem = await call(client, "POST", "/detokenize", admin_headers, expect=400,
                                data=body)
        assert list(problem["errors"]) == [place]
    assert await detokenize(client, admin_headers, [18446744073709551615, "12345678901234567890",
                                                    1.5e19]) == [18446744073709551615,
                                                                 "12345678901234567890", 1.5e19]


async def test_the_audit_event_names_each_token_asked_for(client, admin_headers, tenant):
    visa = await create(client, admin_headers, card(VISA))
    await detokenize(client, admin_headers, [f"{{{{ {visa} }}}}", f"{{{{ {visa} | last4 }}}}"])
    await detokenize(client, admin_headers, ["{{ missing }}"], expect=400)
    rows = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr, "
                                "route: $route}) RETURN properties(e) AS p, e.status "
                                "AS status ORDER BY e.at",
                        **audit_tenant(tenant.tenant_id), route=route_number("POST /detokenize"))
    assert [(audit_tokens(r["p"]), r["status"]) for r in rows] == [([visa], 200),
                                                                   (["missing"], 400)]


async def test_an_error_list_is_bounded_however_many_strings_fail(client, admin_headers):
    # 20,000 bad strings under a 10,000-character key: without a bound the answer was 200 MB.
    problem = await detokenize(client, admin_headers, {"k" * 10_000: ["{{"] * 20_000},
                               expect=400)
    assert len(problem["errors"]) == MAX_LISTED_ERRORS
    assert all(len(name) <= MAX_FIELD_NAME for name in problem["errors"])
    assert len(orjson.dumps(problem)) < 64_000
