"""Defects an integrator's trial found in the proxy: each test fails on the code before its fix."""

from __future__ import annotations

import orjson
import pytest
from factories import audit_tenant, audit_tokens

from ._support import create_proxy, create_token, cypher, json_of
from .test_proxy_calls import destination, proxied, settings

__all__ = ["destination", "settings"]  # the fixtures, shared with the other proxy calls

CANARY = "5105105105105100"
CARD = {"number": CANARY, "expiration_month": 3, "expiration_year": 2031}
NOT_REPLACED_HERE = ("must not hold `{{`: token expressions are replaced only in the body and "
                     "in the headers the proxy's header_allowlist names")
ONLY_ALLOWED = ('may use one filter among last4, card_bin, card_mask, reveal_last: <0-99>, '
                'card_exp[: "<format>"] and json[: "<$.path>"], or json: "<$.path>" then one of '
                'the others but json (json: "$.number" | last4)')


@pytest.fixture
async def proxy(client, admin_headers, destination):
    return await create_proxy(client, admin_headers, destination.base + "/v1",
                              header_allowlist=["X-Card"])


# -- a card's last four: a selection, then one filter ---------------------------------------------

async def test_a_cards_last_four_reach_the_destination_through_a_selection(
        client, admin_headers, destination, proxy):
    card = await create_token(client, admin_headers, CARD, type="card")
    wallet = await create_token(client, admin_headers, {"card": CARD, "holder": "A"})
    resp = await client.post(proxied(proxy), headers={
        **admin_headers, "X-Card": f'ends {{{{ {card} | json: "$.number" | last4 }}}}'}, json={
        "last4": f'{{{{ {card} | json: "$.number" | last4 }}}}',
        "spaced": f"{{{{ {card} |json:'$.number'|last4}}}}",
        "inside": f'card ending {{{{ {card} | json: "$.number" | last4 }}}}.',
        "rl": f'{{{{ {card} | json: "$.number" | reveal_last: 4 }}}}',
        "mask": f'{{{{ {wallet} | json: "$.card" | card_mask }}}}',
        "bin": f'{{{{ {wallet} | json: "$.card.number" | card_bin }}}}',
        "exp": f'{{{{ {wallet} | json: "$.card" | card_exp: "MM/YYYY" }}}}',
        "month": f'{{{{ {card} | json: "$.expiration_month" | last4 }}}}',
        "missing": f'{{{{ {card} | json: "$.cvc" | last4 }}}}',
        # Without the selection, last4 and reveal_last work on the object's JSON text.
        "text": f"{{{{ {card} | last4 }}}}", "text_rl": f"{{{{ {card} | reveal_last: 4 }}}}"})
    assert resp.status == 201, await resp.text()
    seen = destination.requests[-1]
    text = orjson.dumps(CARD, option=orjson.OPT_SORT_KEYS).decode()
    assert json_of(seen) == {
        "last4": "5100", "spaced": "5100", "inside": "card ending 5100.",
        "rl": "X" * 12 + "5100", "mask": "510510XXXXXX5100", "bin": "51051051",
        "exp": "03/2031", "month": "3", "missing": "",
        "text": text[-4:], "text_rl": "X" * (len(text) - 4) + text[-4:]}
    assert seen["headers"]["X-Card"] == "ends 5100"


@pytest.mark.parametrize("filters", [
    "last4 | card_mask",  # two filters, the first no selection
    'last4 | json: "$.number"',  # json after another filter
    'json: "$.number" | json',  # a second json
    'json: "$.number" | json: "$.x"',
    'json | last4',  # json without a path selects nothing
    'json: "$.number" | last4 | last4',  # more than two
    'json: "$.number" | reveal_last: 4 | last4',
    'json: "$.number" | upcase',  # the second outside the list
    'json: "$.number" | replace: "1", "2"',
    'json: "$.number" |',  # an empty second filter
    'json: "number" | last4',  # an invalid path
    'json: "$.number" | reveal_last: 100'])
async def test_other_chains_are_400s_before_any_token_is_read(
        client, admin_headers, destination, proxy, tenant, filters):
    card = await create_token(client, admin_headers, CARD, type="card")
    for token in (card, "no-such-token"):  # a token read would be told apart
        resp = await client.post(proxied(proxy), headers=admin_headers,
                                 json={"a": {"b": f"{{{{ {token} | {filters} }}}}"}})
        body = await resp.json()
        assert (resp.status, body["detail"], body["errors"]) == (
            400, "The request holds invalid token expressions.", {"a.b": [ONLY_ALLOWED]})
    assert destination.requests == []
    events = await cypher(client, "MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr, "
                                  "operation: 'token:use'}) RETURN properties(e) AS p",
                          **audit_tenant(tenant.tenant_id))
    assert len(events) == 2 and all(not audit_tokens(e["p"]) for e in events)


# -- expressions where they are never replaced -----------------------------------------------------

@pytest.mark.parametrize("query", [
    "card={{%20tok%20}}", "card={{ tok }}", "a=1&card=%7B%7B%20tok%20%7D%7D",
    "card=%257B%257Btok", "{{tok}}"])
async def test_an_expression_in_the_query_is_a_400_and_nothing_is_sent(
        client, admin_headers, destination, proxy, query):
    card = await create_token(client, admin_headers, CARD, type="card")
    query = query.replace("tok", card)
    resp = await client.get(f"{proxied(proxy, 'q')}?{query}", headers=admin_headers)
    text = await resp.text()
    assert resp.status == 400, text
    assert orjson.loads(text)["errors"] == {"query": [NOT_REPLACED_HERE]}
    assert card not in text
    assert destination.requests == []
    resp = await client.get(f"{proxied(proxy, 'q')}?card=%7Bid%7D&b={{x}}", headers=admin_headers)
    assert resp.status == 201
    assert destination.requests[-1]["path"].endswith("/v1/q?card=%7Bid%7D&b=%7Bx%7D")


async def test_an_expression_in_a_header_the_proxy_does_not_allow_is_a_400_and_nothing_is_sent(
        client, admin_headers, destination, proxy):
    card = await create_token(client, admin_headers, CARD, type="card")
    resp = await client.post(proxied(proxy), headers={
        **admin_headers, "X-Other": f"Bearer {{{{ {card} }}}} secret-part",
        "X-Card": f'{{{{ {card} | json: "$.number" | last4 }}}}'},
        json={"a": f"{{{{ {card} | card_mask }}}}"})
    text = await resp.text()
    assert resp.status == 400, text
    assert orjson.loads(text)["errors"] == {"headers.X-Other": [NOT_REPLACED_HERE]}
    assert card not in text and "secret-part" not in text and "Bearer" not in text
    assert destination.requests == []
    # A header the vault drops is not judged, and one without `{{` goes as sent.
    resp = await client.post(proxied(proxy), headers={
        **admin_headers, "Cookie": f"a={{{{ {card} }}}}", "X-Other": "{ plain }",
        "X-Card": f'{{{{ {card} | json: "$.number" | last4 }}}}'}, json={"a": 1})
    assert resp.status == 201, await resp.text()
    headers = destination.requests[-1]["headers"]
    assert (headers["X-Other"], headers["X-Card"], "Cookie" in headers) == (
        "{ plain }", "5100", False)


# -- OpenAPI: the call route declares what it answers ---------------------------------------------

async def test_the_call_route_declares_415_and_answers_it(
        client, admin_headers, destination, proxy):
    resp = await client.get("/openapi.json")
    document = await resp.json()
    item = document["paths"]["/proxy/{proxy_id}/{path}"]
    assert sorted(item) == ["delete", "get", "patch", "post", "put"]  # HEAD, OPTIONS undescribed
    for method, op in item.items():
        assert sorted(op["responses"]) == [
            "200", "400", "401", "403", "404", "413", "415", "429", "502", "503"], method
    resp = await client.post(proxied(proxy), data=b"\x1f\x8b", headers={
        **admin_headers, "Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert resp.status == 415 and resp.content_type == "application/problem+json"
    assert destination.requests == []


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS"])
async def test_head_and_options_are_served_though_not_described(
        client, admin_headers, destination, proxy, method):
    resp = await client.request(method, proxied(proxy, "h"), headers=admin_headers)
    assert resp.status == 201 and resp.headers["SVC-PROXY-STATUS"] == "forwarded"
    assert destination.requests[-1]["method"] == method
