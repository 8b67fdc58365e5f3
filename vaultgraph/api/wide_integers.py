"""Integers in a JSON body beyond what orjson reads exactly.

orjson reads an integer exactly from -2**63 to 2**64 - 1 (and writes no other), and one beyond
as the nearest float: 98765432109876543210 would be stored as 9.876543210987654e+19. A vault
keeps what it was given or refuses it, so `request_io.read_json` refuses such a body, naming
the integer's place. Every body passes `may_hold_one`, which is cheap; the rest is done only
for a body it lets through.
"""

from __future__ import annotations

import json
import re
from typing import Any

INT_MIN, INT_MAX = -2**63, 2**64 - 1
MESSAGE = (f"must be an integer from {INT_MIN} to {INT_MAX} (a larger number can be sent as a "
           "string)")

# An integer beyond them is spelled with 20 digits or more, or a minus and 19. Inside an array
# or object it comes after `:`, `,`, `[` or white space: with each digit seen as "0" and each of
# those, and the minus, as ":", the body holds ":" and 19 "0"s then. A run of digits that starts
# a string (an account number, "12345678901234567890") follows a quote: no match.
_NUMBER_VIEW = bytes.maketrans(b"0123456789-:,[ \t\r\n", b"0" * 10 + b":" * 8)
_PRECEDED_RUN = b":" + b"0" * 19

# A JSON string (in a valid document a `"` outside a string opens one, so these are exactly its
# strings), and, once they are emptied, an integer of 19 digits or more.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_LONG_INTEGER = re.compile(rb"(?<![^\s:,\[])-?[0-9]{19,}(?![.eE0-9])")


def may_hold_one(raw: bytes, body: Any) -> bool:
    """Whether `raw`, which orjson read as `body`, might spell an integer beyond INT_MIN to
    INT_MAX. Every body takes this test: one translation and one search, in C (about 0.4 µs for
    a 200-byte body); it is false for any body without a run of 19 digits where a number may
    stand (true for some that hold none, such as a 19-digit integer: `place_of_first` passes
    those). A body that is a number alone is read as a float."""
    return raw.translate(_NUMBER_VIEW).find(_PRECEDED_RUN) >= 0 or type(body) is float


def _beyond(spelling: bytes) -> bool:
    return len(spelling) > 21 or not INT_MIN <= int(spelling) <= INT_MAX


class _Beyond:
    """What the standard library's parser gives for such an integer, to find its place."""


_BEYOND = _Beyond()


def _exact(text: str) -> int | _Beyond:
    return _BEYOND if _beyond(text.encode()) else int(text)


def place_of_first(raw: bytes) -> str | None:
    """The place (`a.0.b`; `body` for the document itself) of the first integer beyond INT_MIN
    to INT_MAX in `raw`, a document orjson read; None when there is none. Its strings are
    emptied and its long integers checked (in C but for those); the standard library's parser
    then reads the document again, keeping such integers apart, to name the place."""
    if not any(_beyond(m[0]) for m in _LONG_INTEGER.finditer(_STRING.sub(b'""', raw))):
        return None
    try:
        document = json.loads(raw, parse_int=_exact)
    except (RecursionError, ValueError):
        # Nested deeper than the standard parser reads (orjson reads 1,024 levels), or a
        # document it would not take: the body is named.
        return "body"
    if not isinstance(document, dict | list):  # the number alone
        return "body"
    path: list[str | int] = []
    stack = [_members(document)]
    while stack:
        for key, value in stack[-1]:
            if value is _BEYOND:
                return ".".join(str(p) for p in (*path, key))
            if isinstance(value, dict | list):
                path.append(key)
                stack.append(_members(value))
                break
        else:
            stack.pop()
            if path:
                path.pop()
    return "body"  # a repeated key's later value replaced it (the document holds it still)


def _members(value: dict | list) -> Any:
    return iter(value.items()) if isinstance(value, dict) else enumerate(value)
