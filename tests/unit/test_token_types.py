import dataclasses

import pytest

from vaultgraph.expressions import (
    DEFAULT_FINGERPRINT_EXPRESSION,
    render,
    render_mask,
    validate_expression,
    validate_mask,
)
from vaultgraph.tokens.types import TOKEN_TYPES, TokenType, get_type

VALID_CARD = {
    "number": "4242424242424242",
    "expiration_month": 12,
    "expiration_year": 2030,
    "cvc": "123",
}
VALID_BANK = {"routing_number": "021000021", "account_number": "000123456789"}

VALID_SAMPLES = {
    "token": {"anything": ["goes", 1]},
    "card": VALID_CARD,
    "bank": VALID_BANK,
    "card_number": "4111111111111111",
    "us_bank_account_number": "12345678901234567",
    "us_bank_routing_number": "110000000",
    "social_security_number": "123-45-6789",
    "employer_id_number": "12-3456789",
}


def errors_of(type_name, data):
    return get_type(type_name).validate(data)


def assert_value_not_echoed(errors, value):
    flat = " ".join(message for messages in errors.values() for message in messages)
    assert str(value) not in flat


# --- registry --------------------------------------------------------------------------------


def test_registry_holds_the_designed_types():
    assert set(TOKEN_TYPES) == set(VALID_SAMPLES)


def test_get_type_returns_none_for_unknown_names():
    assert get_type("nope") is None
    assert get_type(None) is None


def test_token_type_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_type("card").name = "x"


def test_default_masks_are_read_only():
    with pytest.raises(TypeError):
        get_type("card").default_mask["cvc"] = "{{ data.cvc }}"


@pytest.mark.parametrize(
    ("name", "containers"),
    [
        ("token", ("/general/high/",)),
        ("card", ("/pci/high/",)),
        ("bank", ("/bank/high/",)),
        ("card_number", ("/pci/high/",)),
        ("us_bank_account_number", ("/bank/high/",)),
        ("us_bank_routing_number", ("/bank/low/",)),
        ("social_security_number", ("/pii/high/",)),
        ("employer_id_number", ("/pii/low/",)),
    ],
)
def test_default_containers(name, containers):
    assert get_type(name).default_containers == containers


@pytest.mark.parametrize("token_type", TOKEN_TYPES.values(), ids=lambda t: t.name)
def test_default_expressions_compile(token_type: TokenType):
    validate_mask(token_type.default_mask)
    validate_expression(token_type.default_fingerprint_expression)


@pytest.mark.parametrize("token_type", TOKEN_TYPES.values(), ids=lambda t: t.name)
def test_valid_sample_passes_and_fingerprint_is_not_empty(token_type: TokenType):
    sample = VALID_SAMPLES[token_type.name]
    assert token_type.validate(sample) == {}
    fingerprint = render(token_type.default_fingerprint_expression, data=sample, allow_empty=False)
    assert fingerprint


# --- token -----------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [None, 1, "x", [1], {"a": {"b": None}}])
def test_token_accepts_any_data(data):
    assert errors_of("token", data) == {}


def test_token_has_no_default_mask_and_default_fingerprint():
    token = get_type("token")
    assert token.default_mask is None
    assert token.default_fingerprint_expression == DEFAULT_FINGERPRINT_EXPRESSION


# --- card ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "number", ["4242424242424242", "4111111111111111", "378282246310005", "4222222222222",
               "5555555555554444", "6011111111111117", "6250941006528599",
               "6011000990139424009"]  # 13 to 19 digits (the last, 19)
)
def test_card_accepts_luhn_valid_numbers(number):
    assert errors_of("card", {"number": number}) == {}


@pytest.mark.parametrize(
    "number",
    [
        "4242424242424241",  # Luhn check fails
        "4111 1111 1111 1111",  # separators
        "424242424242",  # 12 digits, Luhn-valid
        "42424242424242424242",  # 20 digits
        "\uff14\uff12" * 8,  # full-width digits
        "4242-4242-4242-4242",  # dashes
    ],
)
def test_card_rejects_invalid_numbers_without_echoing_them(number):
    errors = errors_of("card", {"number": number})
    assert errors == {"data.number": ["must be 13 to 19 digits passing the Luhn check"]}
    assert_value_not_echoed(errors, number)


def test_empty_numbers_are_refused_like_other_malformed_ones():
    assert errors_of("card", {"number": ""}) == {
        "data.number": ["must be 13 to 19 digits passing the Luhn check"]}
    assert errors_of("bank", {"routing_number": "", "account_number": "1"}) == {
        "data.routing_number": ["must be a valid ABA routing number"]}


def test_card_number_given_as_integer_is_a_type_error():
    assert errors_of("card", {"number": 4242424242424242}) == {"data.number": ["must be a string"]}


def test_card_number_is_required():
    assert errors_of("card", {"cvc": "123"}) == {"data.number": ["is required"]}


def test_card_data_must_be_an_object():
    assert errors_of("card", "4242424242424242") == {"data": ["must be an object"]}


@pytest.mark.parametrize("month", [0, 13, -1, "12", 1.0, 1.5, True, None])
def test_card_expiration_month_must_be_integer_1_to_12(month):
    errors = errors_of("card", {"number": "4242424242424242", "expiration_month": month})
    assert errors == {"data.expiration_month": ["must be an integer from 1 to 12"]}


@pytest.mark.parametrize("year", [999, 10000, 30, "2030", 2030.5, True])
def test_card_expiration_year_must_be_four_digit_integer(year):
    errors = errors_of("card", {"number": "4242424242424242", "expiration_year": year})
    assert errors == {"data.expiration_year": ["must be a four-digit integer"]}


@pytest.mark.parametrize("cvc", ["12", "12345", "12a", "\uff11\uff12\uff13"])
def test_card_cvc_must_be_3_or_4_digits(cvc):
    errors = errors_of("card", {"number": "4242424242424242", "cvc": cvc})
    assert errors == {"data.cvc": ["must be a string of 3 or 4 digits"]}
    assert_value_not_echoed(errors, cvc)


def test_card_cvc_given_as_integer_is_a_type_error():
    errors = errors_of("card", {"number": "4242424242424242", "cvc": 123})
    assert errors == {"data.cvc": ["must be a string"]}


def test_card_rejects_unknown_fields_without_naming_them():
    # A field name is submitted data too (`{"ssn 512-63-0947": …}`): the error names the
    # allowed fields instead.
    errors = errors_of("card", {"number": "4242424242424242", "pin": "1234"})
    assert errors == {"data": ["has fields that are not allowed; allowed: number, "
                               "expiration_month, expiration_year, cvc"]}


def test_card_reports_every_bad_field():
    errors = errors_of("card", {"number": "1", "expiration_month": 0, "cvc": "1"})
    assert set(errors) == {"data.number", "data.expiration_month", "data.cvc"}


def test_card_default_mask_hides_middle_digits_and_cvc():
    masked = render_mask(get_type("card").default_mask, data=VALID_CARD)
    assert masked == {
        "number": "424242XXXXXX4242",
        "expiration_month": 12,
        "expiration_year": 2030,
    }


def test_card_fingerprint_is_the_number():
    card = get_type("card")
    assert render(card.default_fingerprint_expression, data=VALID_CARD) == "4242424242424242"


# --- bank ------------------------------------------------------------------------------------


@pytest.mark.parametrize("routing", ["110000000", "021000021", "011000015", "026009593",
                                     "121000358"])
def test_bank_accepts_aba_valid_routing_numbers(routing):
    assert errors_of("bank", {"routing_number": routing, "account_number": "1"}) == {}


@pytest.mark.parametrize(
    "routing", ["110000001", "021000020", "021000022", "12345678", "02100002", "0210000210",
                "02100002a"]
)
def test_bank_rejects_invalid_routing_numbers_without_echoing_them(routing):
    errors = errors_of("bank", {"routing_number": routing, "account_number": "1"})
    assert errors == {"data.routing_number": ["must be a valid ABA routing number"]}
    assert_value_not_echoed(errors, routing)


@pytest.mark.parametrize("account", ["", "123456789012345678", "12-34", " 1234", "12345x"])
def test_bank_account_number_must_be_1_to_17_digits(account):
    errors = errors_of("bank", {"routing_number": "110000000", "account_number": account})
    assert errors == {"data.account_number": ["must be a string of 1 to 17 digits"]}


def test_bank_fields_given_as_integers_are_type_errors():
    errors = errors_of("bank", {"routing_number": 110000000, "account_number": 12345})
    assert errors == {
        "data.routing_number": ["must be a string"],
        "data.account_number": ["must be a string"],
    }


def test_bank_fields_are_required():
    assert errors_of("bank", {}) == {
        "data.routing_number": ["is required"],
        "data.account_number": ["is required"],
    }


def test_bank_rejects_unknown_fields_without_naming_them():
    errors = errors_of("bank", {**VALID_BANK, "owner": "x"})
    assert errors == {"data": ["has fields that are not allowed; allowed: routing_number, "
                               "account_number"]}


def test_bank_default_mask_shows_routing_and_last4_of_account():
    masked = render_mask(get_type("bank").default_mask, data=VALID_BANK)
    assert masked == {"routing_number": "021000021", "account_number": "XXXXXXXX6789"}


def test_bank_fingerprint_combines_routing_and_account():
    bank = get_type("bank")
    assert render(bank.default_fingerprint_expression, data=VALID_BANK) == "021000021|000123456789"


# --- card_number -----------------------------------------------------------------------------


def test_card_number_accepts_luhn_valid_string():
    assert errors_of("card_number", "4242424242424242") == {}


@pytest.mark.parametrize("data", ["4242424242424241", "1234"])
def test_card_number_rejects_invalid_numbers(data):
    errors = errors_of("card_number", data)
    assert errors == {"data": ["must be 13 to 19 digits passing the Luhn check"]}
    assert_value_not_echoed(errors, data)


@pytest.mark.parametrize("data", [4242424242424242, {"number": "4242424242424242"}, None])
def test_card_number_rejects_non_strings(data):
    assert errors_of("card_number", data) == {"data": ["must be a string"]}


def test_card_number_default_mask():
    mask = get_type("card_number").default_mask
    assert render_mask(mask, data="4111111111111111") == "411111XXXXXX1111"


# --- us_bank_account_number -------------------------------------------------------------------


@pytest.mark.parametrize("data", ["", "123456789012345678", "12 34", 1234])
def test_us_bank_account_number_must_be_1_to_17_digits(data):
    assert errors_of("us_bank_account_number", data)


def test_us_bank_account_number_mask_reveals_last4():
    mask = get_type("us_bank_account_number").default_mask
    assert render_mask(mask, data="000123456789") == "XXXXXXXX6789"


# --- us_bank_routing_number -------------------------------------------------------------------


def test_us_bank_routing_number_checks_aba_checksum():
    assert errors_of("us_bank_routing_number", "021000021") == {}
    assert errors_of("us_bank_routing_number", "021000022") == {
        "data": ["must be a valid ABA routing number"]
    }


def test_us_bank_routing_number_mask_shows_public_routing_number():
    mask = get_type("us_bank_routing_number").default_mask
    assert render_mask(mask, data="021000021") == "021000021"


# --- social_security_number -------------------------------------------------------------------


@pytest.mark.parametrize("data", ["123-45-6789", "123456789", "899-99-9999"])
def test_ssn_accepts_valid_forms(data):
    assert errors_of("social_security_number", data) == {}


@pytest.mark.parametrize(
    "data",
    [
        "000-12-3456",  # area 000
        "666-12-3456",  # area 666
        "900-12-3456",  # area 9xx
        "123-00-4567",  # group 00
        "123-45-0000",  # serial 0000
        "123-456789",  # one dash only
        "12-345-6789",  # misplaced dashes
        "12345678",  # too short
    ],
)
def test_ssn_rejects_invalid_numbers_without_echoing_them(data):
    errors = errors_of("social_security_number", data)
    assert errors == {"data": ["must be a valid social security number (NNN-NN-NNNN or 9 digits)"]}
    assert_value_not_echoed(errors, data)


def test_ssn_given_as_integer_is_a_type_error():
    assert errors_of("social_security_number", 123456789) == {"data": ["must be a string"]}


def test_ssn_mask_shows_last4_in_fixed_format():
    mask = get_type("social_security_number").default_mask
    assert render_mask(mask, data="123-45-6789") == "XXX-XX-6789"
    assert render_mask(mask, data="123456789") == "XXX-XX-6789"


def test_ssn_fingerprint_ignores_dashes():
    expression = get_type("social_security_number").default_fingerprint_expression
    assert render(expression, data="123-45-6789") == render(expression, data="123456789")


# --- employer_id_number -----------------------------------------------------------------------


@pytest.mark.parametrize("data", ["12-3456789", "123456789"])
def test_ein_accepts_valid_forms(data):
    assert errors_of("employer_id_number", data) == {}


@pytest.mark.parametrize("data", ["123-456789", "12-345678", "1234567890", "12 3456789"])
def test_ein_rejects_invalid_forms(data):
    errors = errors_of("employer_id_number", data)
    assert errors == {
        "data": ["must be a valid employer identification number (NN-NNNNNNN or 9 digits)"]
    }
    assert_value_not_echoed(errors, data)


def test_ein_mask_reveals_last4():
    mask = get_type("employer_id_number").default_mask
    assert render_mask(mask, data="12-3456789") == "XX-XXX6789"
    assert render_mask(mask, data="123456789") == "XX-XXX6789"
