"""The token type registry: default containers, mask and fingerprint, and data validation.

Validation messages describe the rule only; they never repeat the submitted value, because
error bodies and logs must not carry token data. Data is stored as submitted (no
canonicalisation); where a type accepts two spellings of the same value (SSN, EIN) the default
fingerprint strips the separators so both spellings deduplicate together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from vaultgraph.expressions import DEFAULT_FINGERPRINT_EXPRESSION, luhn_valid

Errors = dict[str, list[str]]

CARD_NUMBER_MESSAGE = "must be 13 to 19 digits passing the Luhn check"
ROUTING_NUMBER_MESSAGE = "must be a valid ABA routing number"
ACCOUNT_NUMBER_MESSAGE = "must be a string of 1 to 17 digits"
MONTH_MESSAGE = "must be an integer from 1 to 12"
YEAR_MESSAGE = "must be a four-digit integer"
CVC_MESSAGE = "must be a string of 3 or 4 digits"
SSN_MESSAGE = "must be a valid social security number (NNN-NN-NNNN or 9 digits)"
EIN_MESSAGE = "must be a valid employer identification number (NN-NNNNNNN or 9 digits)"


@dataclass(frozen=True)
class TokenType:
    name: str
    default_containers: tuple[str, ...]
    # None, an expression string, or a read-only mapping of expressions (see render_mask).
    default_mask: Any
    default_fingerprint_expression: str
    validate: Callable[[Any], Errors]


# --- single-value rules: each returns a message, or None when the value is valid -------------


def _digits(value: Any, low: int, high: int) -> bool:
    # ASCII digits only: isdigit() alone would also accept other scripts' digits.
    return (isinstance(value, str) and low <= len(value) <= high and value.isascii()
            and value.isdigit())


def _card_number(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if not _digits(value, 13, 19) or not luhn_valid(value):
        return CARD_NUMBER_MESSAGE
    return None


def _routing_number(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if not _digits(value, 9, 9):
        return ROUTING_NUMBER_MESSAGE
    d = [int(ch) for ch in value]
    checksum = 3 * (d[0] + d[3] + d[6]) + 7 * (d[1] + d[4] + d[7]) + (d[2] + d[5] + d[8])
    return None if checksum % 10 == 0 else ROUTING_NUMBER_MESSAGE


def _account_number(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    return None if _digits(value, 1, 17) else ACCOUNT_NUMBER_MESSAGE


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _month(value: Any) -> str | None:
    return None if _is_int(value) and 1 <= value <= 12 else MONTH_MESSAGE


def _year(value: Any) -> str | None:
    return None if _is_int(value) and 1000 <= value <= 9999 else YEAR_MESSAGE


def _cvc(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    return None if _digits(value, 3, 4) else CVC_MESSAGE


_SSN = re.compile(r"([0-9]{3})-?([0-9]{2})-?([0-9]{4})")
_EIN = re.compile(r"[0-9]{2}-[0-9]{7}|[0-9]{9}")


def _ssn(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    match = _SSN.fullmatch(value)
    # Dashes must be both present or both absent.
    if match is None or value.count("-") not in (0, 2):
        return SSN_MESSAGE
    area, group, serial = match.groups()
    # Never-issued ranges (SSA): area 000, 666 and 900-999; group 00; serial 0000.
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return SSN_MESSAGE
    return None


def _ein(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    return None if _EIN.fullmatch(value) else EIN_MESSAGE


# --- validators over the whole `data` value ------------------------------------------------


def _no_validation(data: Any) -> Errors:
    return {}


def _scalar(rule: Callable[[Any], str | None]) -> Callable[[Any], Errors]:
    def validate(data: Any) -> Errors:
        message = rule(data)
        return {"data": [message]} if message else {}

    return validate


def _object(
    required: Mapping[str, Callable[[Any], str | None]],
    optional: Mapping[str, Callable[[Any], str | None]],
) -> Callable[[Any], Errors]:
    allowed = ", ".join((*required, *optional))
    # Built once: each field's rule, whether it is required, and the error key it is named by.
    rules = tuple((name, rule, name in required, f"data.{name}")
                  for name, rule in (*required.items(), *optional.items()))
    names = frozenset((*required, *optional))

    def validate(data: Any) -> Errors:
        if not isinstance(data, dict):
            return {"data": ["must be an object"]}
        errors: Errors = {}
        for name, rule, is_required, key in rules:
            if name not in data:
                if is_required:
                    errors[key] = ["is required"]
                continue
            message = rule(data[name])
            if message:
                errors[key] = [message]
        if not names.issuperset(data):
            # Named by the allowed fields, never by the submitted ones: a key is data too.
            errors["data"] = [f"has fields that are not allowed; allowed: {allowed}"]
        return errors

    return validate


# --- the registry --------------------------------------------------------------------------

_CARD_MASK = MappingProxyType(
    {
        "number": "{{ data.number | card_mask }}",
        "expiration_month": "{{ data.expiration_month }}",
        "expiration_year": "{{ data.expiration_year }}",
    }
)
_BANK_MASK = MappingProxyType(
    {
        "routing_number": "{{ data.routing_number }}",
        "account_number": "{{ data.account_number | reveal_last: 4 }}",
    }
)
_DIGITS_ONLY_FINGERPRINT = "{{ data | remove: '-' }}"

_TYPES = (
    TokenType(
        name="token",
        default_containers=("/general/high/",),
        default_mask=None,
        default_fingerprint_expression=DEFAULT_FINGERPRINT_EXPRESSION,
        validate=_no_validation,
    ),
    TokenType(
        name="card",
        default_containers=("/pci/high/",),
        # The cvc is never part of a mask.
        default_mask=_CARD_MASK,
        default_fingerprint_expression="{{ data.number }}",
        validate=_object(
            required={"number": _card_number},
            optional={"expiration_month": _month, "expiration_year": _year, "cvc": _cvc},
        ),
    ),
    TokenType(
        name="bank",
        default_containers=("/bank/high/",),
        default_mask=_BANK_MASK,
        default_fingerprint_expression="{{ data.routing_number }}|{{ data.account_number }}",
        validate=_object(
            required={"routing_number": _routing_number, "account_number": _account_number},
            optional={},
        ),
    ),
    TokenType(
        name="card_number",
        default_containers=("/pci/high/",),
        default_mask="{{ data | card_mask }}",
        default_fingerprint_expression=DEFAULT_FINGERPRINT_EXPRESSION,
        validate=_scalar(_card_number),
    ),
    TokenType(
        name="us_bank_account_number",
        default_containers=("/bank/high/",),
        default_mask="{{ data | reveal_last: 4 }}",
        default_fingerprint_expression=DEFAULT_FINGERPRINT_EXPRESSION,
        validate=_scalar(_account_number),
    ),
    TokenType(
        name="us_bank_routing_number",
        default_containers=("/bank/low/",),
        # Routing numbers identify banks, not customers: they are printed on every cheque and
        # published in the Federal Reserve directory, so masking them protects nothing.
        default_mask="{{ data }}",
        default_fingerprint_expression=DEFAULT_FINGERPRINT_EXPRESSION,
        validate=_scalar(_routing_number),
    ),
    TokenType(
        name="social_security_number",
        default_containers=("/pii/high/",),
        default_mask="XXX-XX-{{ data | last4 }}",
        default_fingerprint_expression=_DIGITS_ONLY_FINGERPRINT,
        validate=_scalar(_ssn),
    ),
    TokenType(
        name="employer_id_number",
        default_containers=("/pii/low/",),
        default_mask="XX-XXX{{ data | last4 }}",
        default_fingerprint_expression=_DIGITS_ONLY_FINGERPRINT,
        validate=_scalar(_ein),
    ),
)

TOKEN_TYPES: Mapping[str, TokenType] = MappingProxyType({t.name: t for t in _TYPES})


def get_type(name: str) -> TokenType | None:
    return TOKEN_TYPES.get(name) if isinstance(name, str) else None
