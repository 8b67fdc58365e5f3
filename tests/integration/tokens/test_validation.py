"""Token data validation: card and bank shapes, digits and checksums (the types in
docs/tokens-and-expressions.md, "Token types").

Every refusal is a 400 problem whose `errors` map names each bad field, and no error body ever
repeats the value that was submitted.
"""

from __future__ import annotations

import orjson
import pytest

from ._support import ACCOUNT, ROUTING, SSN, VISA, assert_names


async def refused(api, client, admin_headers, body: dict, *fields: str) -> dict:
    """POST the body, expect 400 naming every field, and check no submitted value is echoed."""
    resp = await client.post("/tokens", json=body, headers=admin_headers)
    text = await resp.text()
    assert resp.status == 400, text
    assert resp.content_type == "application/problem+json"
    problem = await resp.json(content_type=None)
    for field in fields:
        assert_names(problem, field)
    # The trace id is random hex the service made: a short value ("123") is in it by chance
    # about once in 140 runs, which is no echo.
    shown = text.replace(problem.get("trace_id") or "\0", "")
    for value in _leaves(body["data"]):
        if isinstance(value, str) and len(value) >= 3:
            assert value not in shown, f"error body echoes {value!r}"
    return problem


def _leaves(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


# --- card: number, expiration month and year, cvc -----------------------------------------------

# One example per rule here; the full tables are unit tests (tests/unit/test_token_types.py).
@pytest.mark.parametrize("number", [VISA, "4222222222222"])
async def test_card_accepts_luhn_valid_numbers_of_13_to_19_digits(api, number):
    await api.create({"type": "card", "data": {"number": number}})


async def test_card_accepts_every_optional_field(api):
    await api.create({"type": "card", "data": {"number": VISA, "expiration_month": 12,
                                               "expiration_year": 2030, "cvc": "1234"}})


@pytest.mark.parametrize("number", ["4242424242424241", "4242 4242 4242 4242"])
async def test_card_number_must_pass_luhn_without_separators(api, client, admin_headers, number):
    await refused(api, client, admin_headers,
                  {"type": "card", "data": {"number": number}}, "data.number")


async def test_card_number_is_required(api, client, admin_headers):
    await refused(api, client, admin_headers,
                  {"type": "card", "data": {"cvc": "123"}}, "data.number")


async def test_card_number_must_be_a_string(api, client, admin_headers):
    await refused(api, client, admin_headers,
                  {"type": "card", "data": {"number": 4242424242424242}}, "data.number")


@pytest.mark.parametrize("month", [13, "12"])
async def test_card_month_is_an_integer_from_1_to_12(api, client, admin_headers, month):
    await refused(api, client, admin_headers,
                  {"type": "card", "data": {"number": VISA, "expiration_month": month}},
                  "data.expiration_month")


@pytest.mark.parametrize("month", [1, 12])
async def test_card_month_bounds_are_accepted(api, month):
    await api.create({"type": "card", "data": {"number": VISA, "expiration_month": month}})


@pytest.mark.parametrize("year", [30, "2030"])
async def test_card_year_has_four_digits(api, client, admin_headers, year):
    await refused(api, client, admin_headers,
                  {"type": "card", "data": {"number": VISA, "expiration_year": year}},
                  "data.expiration_year")


@pytest.mark.parametrize("cvc", ["12345", 123])
async def test_card_cvc_is_three_or_four_digits(api, client, admin_headers, cvc):
    await refused(api, client, admin_headers,
                  {"type": "card", "data": {"number": VISA, "cvc": cvc}}, "data.cvc")


async def test_card_every_bad_field_is_named(api, client, admin_headers):
    await refused(api, client, admin_headers,
                  {"type": "card", "data": {"number": "4242424242424241", "expiration_month": 13,
                                            "expiration_year": 99, "cvc": "98765"}},
                  "data.number", "data.expiration_month", "data.expiration_year", "data.cvc")


async def test_card_data_must_be_an_object(api, client, admin_headers):
    await refused(api, client, admin_headers, {"type": "card", "data": VISA}, "data")


async def test_card_unknown_data_field_is_refused_without_echoing_its_name(api, client,
                                                                          admin_headers):
    problem = await refused(api, client, admin_headers,
                            {"type": "card", "data": {"number": VISA, "pin-8362": "x"}}, "data")
    assert "pin-8362" not in str(problem)


# --- bank: ABA routing number, account number ------------------------------------------------

@pytest.mark.parametrize("routing", [ROUTING])
async def test_bank_accepts_checksum_valid_routing_numbers(api, routing):
    await api.create({"type": "bank", "data": {"routing_number": routing,
                                               "account_number": ACCOUNT}})


@pytest.mark.parametrize("routing", ["021000022", "02100002a"])
async def test_bank_routing_number_is_nine_digits_with_aba_checksum(api, client, admin_headers,
                                                                    routing):
    await refused(api, client, admin_headers,
                  {"type": "bank", "data": {"routing_number": routing,
                                            "account_number": ACCOUNT}},
                  "data.routing_number")


@pytest.mark.parametrize("account", ["1", "12345678901234567"])
async def test_bank_account_number_of_up_to_17_digits(api, account):
    await api.create({"type": "bank", "data": {"routing_number": ROUTING,
                                               "account_number": account}})


@pytest.mark.parametrize("account", ["123456789012345678", "12-34"])
async def test_bank_account_number_over_17_digits_or_not_digits(api, client, admin_headers,
                                                                account):
    await refused(api, client, admin_headers,
                  {"type": "bank", "data": {"routing_number": ROUTING,
                                            "account_number": account}},
                  "data.account_number")


async def test_bank_both_fields_are_required(api, client, admin_headers):
    await refused(api, client, admin_headers, {"type": "bank", "data": {}},
                  "data.routing_number", "data.account_number")


# --- the scalar types -----------------------------------------------------------------------

@pytest.mark.parametrize(("type_", "good", "bad"), [
    ("card_number", VISA, "4242424242424241"),
    ("us_bank_routing_number", ROUTING, "021000022"),
    ("us_bank_account_number", ACCOUNT, "123456789012345678"),
    ("social_security_number", SSN, "000-12-3456"),
    ("social_security_number", "512630947", "666-12-3456"),
    ("social_security_number", SSN, "512-63094-7"),
    ("employer_id_number", "12-3456789", "1-23456789"),
])
async def test_scalar_types_validate_their_data(api, client, admin_headers, type_, good, bad):
    await api.create({"type": type_, "data": good})
    await refused(api, client, admin_headers, {"type": type_, "data": bad}, "data")


async def test_token_type_accepts_any_data(api):
    await api.create({"type": "token", "data": {"anything": ["at", "all", 1]}})


@pytest.mark.parametrize("body", [[VISA, "an array"], VISA, 4242, None, True])
@pytest.mark.parametrize("method, path, content_type", [
    ("POST", "/tokens", "application/json"),
    ("PATCH", "/tokens/{id}", "application/merge-patch+json"),
    ("POST", "/tokens/search", "application/json"),
    ("POST", "/applications", "application/json"),
])
async def test_a_body_that_is_not_a_json_object_is_a_400_saying_so(
        api, client, admin_headers, method, path, content_type, body):
    # Not an error on a made-up field `_` (as before) nor a list of missing fields: the body
    # itself is named, and nothing of it is echoed.
    token = await api.create({"type": "token", "data": 1})
    resp = await client.request(method, path.format(id=token["id"]), data=orjson.dumps(body),
                                headers={**admin_headers, "Content-Type": content_type})
    text = await resp.text()
    assert resp.status == 400, text
    problem = await resp.json(content_type=None)
    assert problem["detail"] == "The request body must be a JSON object."
    assert "errors" not in problem and VISA not in text


# --- integers beyond 64 bits ------------------------------------------------------------------

WIDE_INTEGER = ("must be an integer from -9223372036854775808 to 18446744073709551615 (a "
                "larger number can be sent as a string)")


@pytest.mark.parametrize("literal", [
    b"98765432109876543210", b"18446744073709551616", b"-9223372036854775809",
    b"123456789012345678901234567890"])
@pytest.mark.parametrize(("template", "place"), [
    (b'{"type": "token", "data": {"acct": %s}}', "data.acct"),
    (b'{"type":"token","data":{"ids":[1,%s],"note":"x"}}', "data.ids.1"),
    (b'{"type": "token", "data": 1, "metadata": {"n": %s}}', "metadata.n")])
async def test_an_integer_beyond_64_bits_is_refused_naming_its_place(client, admin_headers,
                                                                      literal, template, place):
    # orjson reads such an integer as the nearest float: the vault stored 9.876543210987654e+19
    # for 98765432109876543210 (and orjson could not write the integer back if it were kept).
    resp = await client.post("/tokens", data=template % literal,
                             headers={**admin_headers, "Content-Type": "application/json"})
    text = await resp.text()
    assert resp.status == 400, text
    assert resp.content_type == "application/problem+json"
    assert (await resp.json(content_type=None))["errors"] == {place: [WIDE_INTEGER]}
    assert literal.decode() not in text.replace(WIDE_INTEGER, "")  # the rule's bounds only


async def test_64_bit_integers_long_digit_strings_and_floats_are_kept_as_given(api):
    data = {"max": 18446744073709551615, "min": -9223372036854775808,
            "acct": "12345678901234567890", "note": "acct: 123456789012345678901234567890",
            "ids": ["-12345678901234567890"], "float": 1.5e19, "big_float": 1.2345e30}
    token = await api.create({"type": "token", "data": data})
    assert token["data"] == data
    read = (await api.get(token["id"]))["data"]
    assert read == data
    assert [type(read[k]) for k in ("max", "min", "float")] == [int, int, float]
