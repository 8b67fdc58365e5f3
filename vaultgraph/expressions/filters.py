"""The vault's Liquid filters: masking, aliasing, card helpers, JSON and conversions.

Every filter tolerates missing input and raises only `ExpressionError` (never with data).
"""

from __future__ import annotations

import base64
import json
import math
import re
import secrets
import string
from collections.abc import Mapping, Sequence
from typing import Any

from liquid import is_undefined

from .errors import (
    MAX_PAD_LENGTH,
    ExpressionError,
)

# --- value helpers -------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Undefined is a Mapping in python-liquid; treat it as a missing value, like None."""
    return None if is_undefined(value) else value


def _compact_json(value: Any) -> str:
    try:
        return json.dumps(
            value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError):
        raise ExpressionError("value cannot be encoded as JSON") from None


def as_text(value: Any) -> str:
    """The string form filters work on: Liquid's own for scalars, compact JSON for structures."""
    value = _plain(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return _compact_json(value)


def _int_arg(value: Any, *, minimum: int = 0, maximum: int | None = None) -> int:
    value = _plain(value)
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,6}", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExpressionError("invalid filter argument")
    if value < minimum or (maximum is not None and value > maximum):
        raise ExpressionError("invalid filter argument")
    return value


def _char_arg(value: Any) -> str:
    value = _plain(value)
    if not isinstance(value, str) or len(value) != 1:
        raise ExpressionError("invalid filter argument")
    return value


def _card_number(value: Any) -> str:
    if type(value) is str:  # what a mask passes: no Undefined, no mapping to look into
        return value
    value = _plain(value)
    if isinstance(value, Mapping):
        value = _plain(value.get("number"))
    return as_text(value)


def luhn_valid(digits: str) -> bool:
    """True when an ASCII digit string passes the Luhn (mod 10) check."""
    # isdigit() alone would take other scripts' digits; an ASCII one is 0-9 only.
    if not (digits.isascii() and digits.isdigit()):
        return False
    return _luhn_sum(digits) % 10 == 0


# Every second digit from the right is doubled, less 9 when that makes two digits.
_DOUBLED = bytes.maketrans(b"0123456789", b"0246813579")


def _luhn_sum(digits: str) -> int:
    """The Luhn sum of an ASCII digit string: summed as bytes (each digit's code less 48), four
    times faster than a loop over its characters."""
    codes = digits.encode()
    return sum(codes[-1::-2]) + sum(codes[-2::-2].translate(_DOUBLED)) - 48 * len(codes)


# --- filters -------------------------------------------------------------------------------


def reveal_last(value: Any, count: Any, mask_char: Any = "X") -> str:
    text, count, mask_char = as_text(value), _int_arg(count), _char_arg(mask_char)
    hidden = max(len(text) - count, 0)
    return mask_char * hidden + text[hidden:]


def reveal(value: Any, first: Any, last: Any, mask_char: Any = "X") -> str:
    text = as_text(value)
    first, last, mask_char = _int_arg(first), _int_arg(last), _char_arg(mask_char)
    if first + last >= len(text):  # every character is in a revealed part
        return text
    return text[:first] + mask_char * (len(text) - first - last) + text[len(text) - last :]


def last4(value: Any) -> str:
    return as_text(value)[-4:]


def pad_left(value: Any, length: Any, pad_char: Any = " ") -> str:
    return as_text(value).rjust(_int_arg(length, maximum=MAX_PAD_LENGTH), _char_arg(pad_char))


def pad_right(value: Any, length: Any, pad_char: Any = " ") -> str:
    return as_text(value).ljust(_int_arg(length, maximum=MAX_PAD_LENGTH), _char_arg(pad_char))


def _random_like(ch: str) -> str:
    if "0" <= ch <= "9":
        return secrets.choice(string.digits)
    if "a" <= ch <= "z":
        return secrets.choice(string.ascii_lowercase)
    if "A" <= ch <= "Z":
        return secrets.choice(string.ascii_uppercase)
    return ch


def alias_preserve_format(value: Any) -> str:
    return "".join(_random_like(ch) for ch in as_text(value))


def alias_preserve_length(value: Any) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in as_text(value))


def alias_card(value: Any) -> str:
    number = _card_number(value)
    if len(number) < 13 or not number.isascii() or not number.isdigit():
        return alias_preserve_format(number)
    # An alias equal to the real number would disclose it; with at least three free digits
    # a repeat is rare, so a few draws suffice.
    for _ in range(16):
        alias = _luhn_alias(number)
        if alias != number:
            return alias
    raise ExpressionError("could not generate an alias")


def _luhn_alias(number: str) -> str:
    """Keep the BIN (first 6) and last 4, draw the middle, then fix one middle digit so the
    result passes Luhn: any single position can reach every residue mod 10."""
    middle = [secrets.choice(string.digits) for _ in range(len(number) - 10)]
    for digit in string.digits:
        middle[-1] = digit
        candidate = number[:6] + "".join(middle) + number[-4:]
        if _luhn_sum(candidate) % 10 == 0:
            return candidate
    raise AssertionError("unreachable: a Luhn check digit always exists")


def card_mask(value: Any) -> str:
    number = _card_number(value)
    # Keeping 10 characters of a short value would show most of it, so only card-length
    # values keep their BIN and last four.
    if len(number) < 13:
        return "X" * len(number)
    return number[:6] + "X" * (len(number) - 10) + number[-4:]


def card_bin(value: Any) -> str:
    number = _card_number(value)
    if len(number) < 13:
        return ""
    return number[:8] if len(number) >= 16 else number[:6]


_EXP_TOKENS = re.compile(r"YYYY|YY|MM")


def card_exp(value: Any, fmt: Any = "MM/YY") -> str:
    value, fmt = _plain(value), _plain(fmt)
    if not isinstance(fmt, str):
        raise ExpressionError("invalid filter argument")
    if not isinstance(value, Mapping):
        return ""
    month = _small_int(value.get("expiration_month"))
    year = _small_int(value.get("expiration_year"))
    if month is None or year is None:
        return ""
    parts = {"MM": f"{month:02d}", "YYYY": f"{year:04d}", "YY": f"{year % 100:02d}"}
    return _EXP_TOKENS.sub(lambda match: parts[match.group(0)], fmt)


def _small_int(value: Any) -> int | None:
    value = _plain(value)
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,4}", value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 9999:
        return value
    return None


_PATH_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(-?[0-9]{1,9})\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


def _parse_path(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise ExpressionError("invalid JSON path")
    steps: list[str | int] = []
    position = 1
    while position < len(path):
        match = _PATH_STEP.match(path, position)
        if match is None:
            raise ExpressionError("invalid JSON path")
        name, index, single, double = match.groups()
        if index is not None:
            steps.append(int(index))
        else:
            steps.append(next(part for part in (name, single, double) if part is not None))
        position = match.end()
    return steps


def json_filter(value: Any, path: Any = None) -> Any:
    """Without a path: the compact JSON text of the value. With `$.a[0]`-style path: the value
    found there, unencoded so further filters can use it (None when absent)."""
    value, path = _plain(value), _plain(path)
    if path is None:
        return _compact_json(value)
    if not isinstance(path, str):
        raise ExpressionError("invalid JSON path")
    for step in _parse_path(path):
        if isinstance(step, int) and isinstance(value, Sequence) and not isinstance(value, str):
            value = value[step] if -len(value) <= step < len(value) else None
        elif isinstance(step, str) and isinstance(value, Mapping):
            value = _plain(value.get(step))
        else:
            return None
    return value


def stringify(value: Any) -> str:
    return as_text(value)


def to_number(value: Any) -> int | float | None:
    value = _plain(value)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ExpressionError("value is not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?[0-9]+", text):
            try:
                return int(text)
            except ValueError:  # beyond Python's int string-conversion limit
                raise ExpressionError("value is not a number") from None
        try:
            value = float(text)
        except ValueError:
            raise ExpressionError("value is not a number") from None
    if not isinstance(value, float) or not math.isfinite(value):
        raise ExpressionError("value is not a number")
    return int(value) if value.is_integer() else value


_TRUE_WORDS = frozenset({"true", "yes", "1"})
_FALSE_WORDS = frozenset({"false", "no", "0"})


def to_boolean(value: Any) -> bool | None:
    value = _plain(value)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    raise ExpressionError("value is not a boolean")


def to_base64(value: Any) -> str:
    return base64.b64encode(as_text(value).encode("utf-8")).decode("ascii")


def to_base16(value: Any) -> str:
    # RFC 4648 base16 alphabet (upper case).
    return base64.b16encode(as_text(value).encode("utf-8")).decode("ascii")


FILTERS = {
    "reveal_last": reveal_last,
    "reveal": reveal,
    "last4": last4,
    "pad_left": pad_left,
    "pad_right": pad_right,
    "alias_preserve_format": alias_preserve_format,
    "alias_preserve_length": alias_preserve_length,
    "alias_card": alias_card,
    "card_mask": card_mask,
    "card_bin": card_bin,
    "card_exp": card_exp,
    "json": json_filter,
    "stringify": stringify,
    "json_stringify": stringify,
    "to_string": stringify,
    "to_number": to_number,
    "to_boolean": to_boolean,
    "to_base64": to_base64,
    "to_base16": to_base16,
}

