"""Defects a security review found in the proxy: each test fails on the code before its fix."""

from __future__ import annotations

import aiohttp
import orjson
import pytest
from yarl import URL

from vaultgraph.outbound import AddressPolicy, OutboundClient, OutboundError, parse_networks
from vaultgraph.outbound.client import RequestNotSendable

from ._support import app_headers, create_proxy, create_token, get_tail_as_sent, json_of
from .test_proxy_calls import destination, proxied, settings

__all__ = ["destination", "settings"]  # the fixtures, shared with the other proxy calls

CANARY = "5105105105105100"


@pytest.fixture
async def proxy(client, admin_headers, destination):
    return await create_proxy(client, admin_headers, destination.base + "/v1",
                              header_allowlist=["X-Card"])


ONLY_ALLOWED = ('may use one filter among last4, card_bin, card_mask, reveal_last: <0-99>, '
                'card_exp[: "<format>"] and json[: "<$.path>"], or json: "<$.path>" then one of '
                'the others but json (json: "$.number" | last4)')


async def test_render_failures_cannot_tell_the_caller_anything_about_the_data(
        client, admin_headers, destination, proxy):
    """A filter that fails (or overflows the render budget) only on some data would make
    "400 or forwarded" an oracle: every filter outside the allow-list is refused by the
    expression's text alone, the same for every digit probed, and nothing is sent."""
    number = await create_token(client, admin_headers, CANARY, type="card_number")
    caller = await app_headers(client, admin_headers, {
        "container": "/pci/", "transform": "redact", "permissions": ["token:use"]},
        permissions=["token:use"])
    filler = "a" * 2000
    answers = set()
    for digit in "0123456789":
        probe = f'slice: 0, 1 | replace: "{digit}", "{filler}" | replace: "a", "{filler}"'
        resp = await client.post(proxied(proxy), headers=caller,
                                 json={"v": f"{{{{ {number} | {probe} }}}}"})
        body = await resp.json()
        answers.add((resp.status, body["detail"], orjson.dumps(body["errors"])))
    assert answers == {(400, "The request holds invalid token expressions.",
                        orjson.dumps({"v": [ONLY_ALLOWED]}))}
    assert destination.requests == []


@pytest.mark.parametrize("filters", [
    'replace: "1", "2"', "slice: 0, 1", "split: ''", "size", "to_number", "plus: 1",
    "last4 | last4", "json: 'nope'", "reveal_last: 100", "upcase", "json | json"])
async def test_filters_outside_the_allow_list_are_400s_before_any_token_is_read(
        client, admin_headers, destination, proxy, filters):
    resp = await client.post(proxied(proxy), headers=admin_headers,
                             json={"a": {"b": f"{{{{ no-such-token | {filters} }}}}"}})
    assert resp.status == 400
    assert (await resp.json())["errors"] == {"a.b": [ONLY_ALLOWED]}
    assert destination.requests == []


async def test_the_allowed_filters_render_as_detokenize_does(
        client, admin_headers, destination, proxy):
    number = await create_token(client, admin_headers, CANARY, type="card_number")
    card = await create_token(client, admin_headers, {
        "number": CANARY, "expiration_month": 3, "expiration_year": 2031}, type="card")
    resp = await client.post(proxied(proxy), headers=admin_headers, json={
        "last4": f"{{{{ {number} | last4 }}}}", "bin": f"{{{{ {card} | card_bin }}}}",
        "mask": f"{{{{ {card} | card_mask }}}}", "exp": f"{{{{ {card} |card_exp}}}}",
        "exp4": f"{{{{ {card} | card_exp: 'MM/YYYY' }}}}",
        "pan": f'{{{{ {card} | json: "$.number" }}}}', "none": f'{{{{ {card} | json: "$.x" }}}}',
        "tail": f"{{{{ {card} | json: '$.number' }}}}",
        "rl": f"{{{{ {number} | reveal_last: 2 }}}}",
        "whole": f"{{{{ {card} | json }}}}"})
    assert resp.status == 201, await resp.text()
    assert json_of(destination.requests[-1]) == {
        "last4": "5100", "bin": "51051051", "mask": "510510XXXXXX5100", "exp": "03/31",
        "exp4": "03/2031", "pan": CANARY, "none": "", "tail": CANARY,
        "rl": "X" * 14 + "00",
        "whole": orjson.dumps({"expiration_month": 3, "expiration_year": 2031,
                               "number": CANARY}).decode()}


@pytest.mark.parametrize("data", ["abc\r\nX-Injected: 1", "ab\x00c", "a\nb", "a\rb"])
async def test_a_line_break_or_nul_in_a_rendered_header_is_the_render_failure_400(
        client, admin_headers, destination, proxy, data):
    token = await create_token(client, admin_headers, data)
    other = await create_token(client, admin_headers, "fine\tvalue")
    resp = await client.get(proxied(proxy, "h"), headers={
        **admin_headers, "X-Card": f"Bearer {{{{ {token} }}}}"})
    assert resp.status == 400
    body = await resp.json()
    assert (body["detail"], body["errors"]) == (
        "Some token expressions could not be rendered.",
        {"headers.X-Card": ["could not be rendered"]})
    assert data not in await resp.text() and "Injected" not in await resp.text()
    assert destination.requests == []
    resp = await client.get(proxied(proxy, "h"), headers={
        **admin_headers, "X-Card": f"Bearer {{{{ {other} }}}}"})
    assert resp.status == 201 and destination.requests[-1]["headers"]["X-Card"] == \
        "Bearer fine\tvalue"


async def test_the_client_answers_an_unwritable_header_with_an_outbound_error(destination):
    policy = AddressPolicy(allow_http=True, allowed_networks=parse_networks("127.0.0.1/32"))
    outbound = OutboundClient(policy)
    try:
        with pytest.raises(RequestNotSendable) as caught:
            await outbound.request("GET", destination.base + "/x", time_limit=5,
                                   headers={"X-A": "secret\r\nX-B: 1"})
        assert isinstance(caught.value, OutboundError) and "secret" not in str(caught.value)
    finally:
        await outbound.close()
    assert destination.requests == []


@pytest.mark.parametrize("media", ["application/xml", "text/xml", "application/soap+xml"])
async def test_values_in_an_xml_body_are_escaped(
        client, admin_headers, destination, proxy, media):
    token = await create_token(client, admin_headers, """</n><amount>0</amount><n a="'&x""")
    resp = await client.post(proxied(proxy), data=f"<r><n v='{{{{ {token} }}}}'>{{{{ {token} }}}}"
                             f"</n></r>".encode(), headers={**admin_headers, "Content-Type": media})
    assert resp.status == 201, await resp.text()
    escaped = "&lt;/n&gt;&lt;amount&gt;0&lt;/amount&gt;&lt;n a=&quot;&apos;&amp;x"
    assert destination.requests[-1]["body"] == f"<r><n v='{escaped}'>{escaped}</n></r>".encode()
    bad = await create_token(client, admin_headers, "a\x01b")
    resp = await client.post(proxied(proxy), data=f"<r>{{{{ {bad} }}}}</r>".encode(),
                             headers={**admin_headers, "Content-Type": media})
    assert resp.status == 400
    assert (await resp.json())["errors"] == {"body": ["could not be rendered"]}
    assert len(destination.requests) == 1


async def test_a_text_json_body_is_json(client, admin_headers, destination, proxy):
    token = await create_token(client, admin_headers, 'a"b')
    resp = await client.post(proxied(proxy), data=orjson.dumps({"v": f"x {{{{ {token} }}}}"}),
                             headers={**admin_headers, "Content-Type": "text/json"})
    assert resp.status == 201
    assert json_of(destination.requests[-1]) == {"v": 'x a"b'}


@pytest.mark.parametrize("media", ["text/html", "text/csv", "text/markdown"])
async def test_expressions_in_html_csv_and_other_text_bodies_are_refused(
        client, admin_headers, destination, proxy, media):
    token = await create_token(client, admin_headers, "<script>")
    resp = await client.post(proxied(proxy), data=f"<p>{{{{ {token} }}}}</p>".encode(),
                             headers={**admin_headers, "Content-Type": media})
    assert resp.status == 400
    assert list((await resp.json())["errors"]) == ["body"]
    assert destination.requests == []
    resp = await client.post(proxied(proxy), data=b"<p>plain</p>",
                             headers={**admin_headers, "Content-Type": media})
    assert resp.status == 201 and destination.requests[-1]["body"] == b"<p>plain</p>"


@pytest.mark.parametrize("tail", [
    "..;/admin", "a/..;/..;/x", "..;x=1/x", ".;/x", "%2e%2e;/x", "..%3B/x", ";x/y", "..%00/x",
    "a%0db", "a%09b", "a%7f", "...", "..%20/x", ".%20./x", "a./x", "a%20/x", "a..;/x",
    "%EF%BC%8E%EF%BC%8E/x", "%E2%80%A4%E2%80%A4/x", "%E2%80%A5/x", "%EF%B9%92./x",
    "%E3%80%82%E3%80%82/x", "%EF%BC%8F..", "%EF%BC%BC..%EF%BC%BCx"])
async def test_segments_that_servers_read_as_dots_cannot_climb_out(
        client, admin_headers, destination, proxy, tail):
    status, errors = await get_tail_as_sent(client, admin_headers, proxy["id"], tail)
    assert (status, list(errors or ())) == (400, ["path"])
    assert destination.requests == []


@pytest.mark.parametrize("tail", ["a/b;v=1/c", "v1.0/x", "caf%C3%A9", "a%20b", ".well-known/x"])
async def test_ordinary_segments_still_pass(client, admin_headers, destination, proxy, tail):
    status, _ = await get_tail_as_sent(client, admin_headers, proxy["id"], tail)
    assert status == 201
    assert destination.requests[-1]["path"] == f"/v1/{tail}"


async def test_a_body_too_large_once_rendered_is_a_413_and_nothing_is_sent(
        client, admin_headers, destination, proxy):
    token = await create_token(client, admin_headers, "y" * 10_000)
    body = "x" * 1_040_000 + f"{{{{ {token} }}}}"
    resp = await client.post(proxied(proxy), data=body.encode(),
                             headers={**admin_headers, "Content-Type": "text/plain"})
    assert resp.status == 413
    assert (await resp.json())["detail"] == (
        "The request's body is larger than 1048576 bytes once its token expressions are "
        "replaced; nothing was sent.")
    assert destination.requests == []


@pytest.mark.parametrize("tail", ["a/", "a/b/", "a/b;v=1/"])
async def test_one_trailing_slash_is_forwarded(client, admin_headers, destination, proxy, tail):
    resp = await client.get(proxied(proxy, tail), headers=admin_headers)
    assert resp.status == 201, await resp.text()
    assert destination.requests[-1]["path"] == f"/v1/{tail}"


@pytest.mark.parametrize("tail", ["a//", "/", "a/b//"])
async def test_more_than_one_trailing_slash_is_refused(
        client, admin_headers, destination, proxy, tail):
    url = URL(str(client.make_url("/")).rstrip("/") + f"/proxy/{proxy['id']}/{tail}",
              encoded=True)
    async with aiohttp.ClientSession() as session, session.get(
            url, headers=admin_headers) as resp:
        assert resp.status == 400
    assert destination.requests == []


async def test_a_form_in_latin_1_keeps_its_escapes_and_its_character_set(
        client, admin_headers, destination, proxy):
    token = await create_token(client, admin_headers, "café")
    form = "application/x-www-form-urlencoded; charset=latin-1"
    resp = await client.post(proxied(proxy), data=f"a={{{{ {token} }}}}&w=%E9".encode(),
                             headers={**admin_headers, "Content-Type": form})
    assert resp.status == 201, await resp.text()
    assert destination.requests[-1]["body"] == b"a=caf%E9&w=%E9"
    resp = await client.post(proxied(proxy), data=b"w=%FF%FE",
                             headers={**admin_headers, "Content-Type": form.split(";")[0]})
    assert resp.status == 400
    assert (await resp.json())["errors"] == {"body": ["is not valid in its declared character set"]}


@pytest.mark.parametrize("media", ["application/x-www-form-urlencoded", "text/plain"])
async def test_a_value_the_bodys_character_set_cannot_hold_is_the_render_failure_400(
        client, admin_headers, destination, proxy, media):
    token = await create_token(client, admin_headers, "price 5€")
    resp = await client.post(proxied(proxy), data=f"v={{{{ {token} }}}}".encode("latin-1"),
                             headers={**admin_headers, "Content-Type": f"{media}; charset=latin-1"})
    assert resp.status == 400
    body = await resp.json()
    assert (body["detail"], body["errors"]) == (
        "Some token expressions could not be rendered.", {"body": ["could not be rendered"]})
    assert destination.requests == []


async def test_in_a_latin_1_xml_body_a_character_it_lacks_is_a_reference(
        client, admin_headers, destination, proxy):
    token = await create_token(client, admin_headers, "5€ é")
    resp = await client.post(proxied(proxy), data=f"<v>{{{{ {token} }}}}</v>".encode(),
                             headers={**admin_headers,
                                      "Content-Type": "application/xml; charset=latin-1"})
    assert resp.status == 201, await resp.text()
    assert destination.requests[-1]["body"] == "<v>5&#8364; é</v>".encode("latin-1")
