"""Integers beyond 64 bits in JSON bodies (vaultgraph/api/wide_integers.py): the cheap test every
body takes never misses one, and the place named is that of the first, as the standard
library's parser (which reads every integer exactly) finds it."""

from __future__ import annotations

import json
import random

import orjson
import pytest

from vaultgraph.api.wide_integers import INT_MAX, INT_MIN, may_hold_one, place_of_first


def _expected(raw: bytes) -> str | None:
    """The place of the first integer beyond the bounds, in document order, by the standard
    library's parser."""
    beyond = object()
    document = json.loads(raw, parse_int=lambda s: int(s) if INT_MIN <= int(s) <= INT_MAX
                          else beyond)
    stack = [((), document)]
    while stack:
        path, value = stack.pop()
        if value is beyond:
            return ".".join(str(p) for p in path) or "body"
        if isinstance(value, dict):
            stack.extend(reversed([((*path, k), v) for k, v in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([((*path, i), v) for i, v in enumerate(value)]))
    return None


def _place(raw: bytes) -> str | None:
    return place_of_first(raw) if may_hold_one(raw, orjson.loads(raw)) else None


@pytest.mark.parametrize(("raw", "place"), [
    (b'{"acct": 98765432109876543210}', "acct"),
    (b'{"a":[1,{"b":18446744073709551616}]}', "a.1.b"),
    (b'{"a":\n\t-9223372036854775809}', "a"),
    (b'[{}, [], {"k\\"ey": {"": 123456789012345678901234567890}}]', '2.k"ey.'),
    (b"98765432109876543210", "body"),
    (b" -9223372036854775809 ", "body"),
    (b'{"a": "\\\\", "b": [-12345678901234567890]}', "b.0"),
    # Within the bounds, inside strings, floats: nothing.
    (b'{"max": 18446744073709551615, "min": -9223372036854775808}', None),
    (b'{"acct": "12345678901234567890", "note": "acct: 12345678901234567890"}', None),
    (b'{"ids": ["-12345678901234567890"], "k: 12345678901234567890": 1}', None),
    (b'{"f": 1.5e19, "g": 12345678901234567890.5, "h": 1234567890123456789012e0}', None),
    (b'{"e": 1e-123456789012345678901}', None),
    (b"1.5e19", None),
])
def test_the_first_integer_beyond_64_bits_is_named(raw, place):
    assert _place(raw) == place == _expected(raw)


def test_a_document_nested_beyond_the_standard_parser_is_named_body():
    deep = b"[" * 1000 + b"98765432109876543210" + b"]" * 1000
    assert _place(deep) == "body"
    assert _place(deep.replace(b"98765432109876543210", b"1")) is None


def test_ordinary_bodies_are_not_looked_at_twice():
    # (A number of 19 digits is: the second look, `place_of_first`, passes it.)
    card = {"type": "card", "data": {"number": "4242424242424242", "expiration_month": 12,
                                     "expiration_year": 2030, "cvc": "123"}}
    for body in (card, [card] * 100, {"data": {"acct": "12345678901234567890"}},
                 {"n": 123456789012345678, "m": -123456789012345678}):
        raw = orjson.dumps(body)
        assert not may_hold_one(raw, orjson.loads(raw))


def _document(rnd: random.Random, depth: int = 0):
    roll = rnd.random()
    if depth > 4 or roll < 0.4:
        return rnd.choice([
            0, -1, INT_MAX, INT_MAX + 1, INT_MIN, INT_MIN - 1, 10**25, -10**19, 10**19,
            rnd.randrange(-10**22, 10**22), rnd.random() * 10 ** rnd.randrange(25), True, None,
            "12345678901234567890", "a, 123456789012345678901", ": -12345678901234567890",
            '\\"]', "[1,"])
    if roll < 0.7:
        return [_document(rnd, depth + 1) for _ in range(rnd.randrange(4))]
    return {rnd.choice(["a", "b,", "[c", "12345678901234567890", 'e"', ": 99999999999999999999"])
            + str(i): _document(rnd, depth + 1) for i in range(rnd.randrange(4))}


def test_generated_documents_agree_with_the_standard_parser():
    rnd = random.Random(20261206)
    named = 0
    for _ in range(5000):
        raw = json.dumps(_document(rnd), indent=rnd.choice([None, 2]),
                         separators=rnd.choice([(",", ":"), (", ", ": ")])).encode()
        expected = _expected(raw)
        assert _place(raw) == expected, raw
        named += expected is not None
    assert named > 500  # the generator does make such integers
