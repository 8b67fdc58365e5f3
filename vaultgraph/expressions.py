"""Liquid expressions for token ids, masks, search indexes and fingerprints.

Expressions come from API callers and are rendered over plaintext token data, so the
environment is sandboxed (no partial templates, bounded loops, output and nesting) and every
failure surfaces as an `ExpressionError` whose message never carries token data.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import re
import secrets
import string
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from liquid import BoundTemplate, DictLoader, Environment, Mode, Undefined, is_undefined
from liquid.exceptions import LiquidError, LiquidSyntaxError, ResourceLimitError

DEFAULT_FINGERPRINT_EXPRESSION = "{{ data | stringify }}"

MAX_EXPRESSION_LENGTH = 4_096
# Must stay above the largest token data the API accepts (settings.max_data_bytes, 64 KiB by
# default): the default fingerprint renders the whole of `data` as JSON. UTF-8 bytes.
MAX_OUTPUT_BYTES = 1024 * 1024
MAX_MASK_DEPTH = 32
# Bounds the padding filters, which would otherwise allocate before the output limit applies.
MAX_PAD_LENGTH = 4_096
# Every value a filter takes or makes, and the time of one render (a whole mask is one): chained
# filters (`| to_base16 | to_base16 …`), ranges (`(1..100000000) | join`) and replaces multiply
# sizes, and loops of heavy filters burn CPU, long before the output limit is ever checked. A
# value's size counts characters and items (nested ones each time they are reached, as flattening
# reaches them); integers are bounded by bits.
MAX_VALUE_SIZE = MAX_OUTPUT_BYTES
MAX_INT_BITS = 65_536
MAX_RENDER_SECONDS = 0.25

_DISABLED_TAGS = ("include", "render")


class ExpressionError(ValueError):
    """An expression failed to compile or render. The message is always a generic reason."""


class ExpressionLimitError(ExpressionError):
    """A render exceeded a size or time bound."""

    def __init__(self) -> None:
        super().__init__("expression exceeded a resource limit")


class _SandboxedEnvironment(Environment):
    loop_iteration_limit = 1_000
    output_stream_limit = MAX_OUTPUT_BYTES
    local_namespace_limit = MAX_OUTPUT_BYTES
    context_depth_limit = 10
    block_nesting_limit = 10


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


def _text(value: Any) -> str:
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
    value = _plain(value)
    if isinstance(value, Mapping):
        value = _plain(value.get("number"))
    return _text(value)


def luhn_valid(digits: str) -> bool:
    """True when an ASCII digit string passes the Luhn (mod 10) check."""
    if not digits or not all("0" <= ch <= "9" for ch in digits):
        return False
    return _luhn_sum(digits) % 10 == 0


def _luhn_sum(digits: str) -> int:
    total = 0
    for position, ch in enumerate(reversed(digits)):
        digit = ord(ch) - 48
        if position % 2 == 1:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total


# --- filters -------------------------------------------------------------------------------


def reveal_last(value: Any, count: Any, mask_char: Any = "X") -> str:
    text, count, mask_char = _text(value), _int_arg(count), _char_arg(mask_char)
    hidden = max(len(text) - count, 0)
    return mask_char * hidden + text[hidden:]


def reveal(value: Any, first: Any, last: Any, mask_char: Any = "X") -> str:
    text = _text(value)
    first, last, mask_char = _int_arg(first), _int_arg(last), _char_arg(mask_char)
    if first + last >= len(text):  # every character is in a revealed part
        return text
    return text[:first] + mask_char * (len(text) - first - last) + text[len(text) - last :]


def last4(value: Any) -> str:
    return _text(value)[-4:]


def pad_left(value: Any, length: Any, pad_char: Any = " ") -> str:
    return _text(value).rjust(_int_arg(length, maximum=MAX_PAD_LENGTH), _char_arg(pad_char))


def pad_right(value: Any, length: Any, pad_char: Any = " ") -> str:
    return _text(value).ljust(_int_arg(length, maximum=MAX_PAD_LENGTH), _char_arg(pad_char))


def _random_like(ch: str) -> str:
    if "0" <= ch <= "9":
        return secrets.choice(string.digits)
    if "a" <= ch <= "z":
        return secrets.choice(string.ascii_lowercase)
    if "A" <= ch <= "Z":
        return secrets.choice(string.ascii_uppercase)
    return ch


def alias_preserve_format(value: Any) -> str:
    return "".join(_random_like(ch) for ch in _text(value))


def alias_preserve_length(value: Any) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in _text(value))


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
    return _text(value)


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
    return base64.b64encode(_text(value).encode("utf-8")).decode("ascii")


def to_base16(value: Any) -> str:
    # RFC 4648 base16 alphabet (upper case).
    return base64.b16encode(_text(value).encode("utf-8")).decode("ascii")


_FILTERS = {
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


# --- resource bounds -----------------------------------------------------------------------

_deadline: ContextVar[float | None] = ContextVar("expression_deadline", default=None)


@contextmanager
def _time_budget() -> Iterator[None]:
    """One budget for everything rendered inside (a mask's leaves share the mask's)."""
    if _deadline.get() is not None:
        yield
        return
    token = _deadline.set(time.monotonic() + MAX_RENDER_SECONDS)
    try:
        yield
    finally:
        _deadline.reset(token)


def _measure(value: Any, budget: int = MAX_VALUE_SIZE) -> tuple[int, int]:
    """(size, leaf items) of a value; size is past `budget` as soon as the walk knows it is."""
    size = items = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item)
            items += 1
        elif isinstance(item, bool) or item is None or isinstance(item, float):
            size += 1
            items += 1
        elif isinstance(item, int):
            if item.bit_length() > MAX_INT_BITS:
                return budget + 1, items
            size += item.bit_length() // 8 + 1
            items += 1
        elif isinstance(item, range):
            size += len(item)
            items += len(item)
        elif isinstance(item, list | tuple):
            size += len(item) + 1
            if size <= budget:
                stack.extend(item)
        elif isinstance(item, Mapping) and not is_undefined(item):
            size += len(item) + 1
            items += 1
            if size <= budget:
                stack.extend(item.keys())
                stack.extend(item.values())
        else:  # Undefined, Liquid's own objects
            size += 1
            items += 1
        if size > budget:
            return size, items
    return size, items


def _too_big(value: Any) -> bool:
    return _measure(value)[0] > MAX_VALUE_SIZE


def _joined_size(value: Any, separator: Any = " ", *_: Any, **__: Any) -> int:
    size, items = _measure(value)
    return size + items * len(_text(separator))


def _replaced_size(value: Any, old: Any = "", new: Any = "", *_: Any, **__: Any) -> int:
    text, old, new = _text(value), _text(old), _text(new)
    found = len(text) + 1 if old == "" else text.count(old)
    return len(text) + found * max(0, len(new) - len(old))


# Filters whose result can be the product of two inputs' sizes: estimated before they run.
_PRODUCT_SIZE: dict[str, Callable[..., int]] = {"join": _joined_size, "replace": _replaced_size}
# Keyword arguments Liquid itself passes to filters that ask for them.
_LIQUID_KWARGS = ("context", "environment")


def _bounded(name: str, func: Callable) -> Callable:
    product_size = _PRODUCT_SIZE.get(name)

    @functools.wraps(func)  # keeps Liquid's with_context / with_environment marks
    def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
        deadline = _deadline.get()
        if deadline is not None and time.monotonic() > deadline:
            raise ExpressionLimitError()
        inputs = (value, *args, *(v for k, v in kwargs.items() if k not in _LIQUID_KWARGS))
        if any(_too_big(v) for v in inputs):
            raise ExpressionLimitError()
        if product_size is not None and product_size(value, *args) > MAX_VALUE_SIZE:
            raise ExpressionLimitError()
        result = func(value, *args, **kwargs)
        if _too_big(result):
            raise ExpressionLimitError()
        return result

    return bounded


def _build_environment() -> Environment:
    env = _SandboxedEnvironment(
        loader=DictLoader({}),
        tolerance=Mode.STRICT,
        undefined=Undefined,
        strict_filters=True,
        autoescape=False,
    )
    # Removing the tags (rather than relying on the empty loader) makes them a compile-time
    # syntax error, so a bad mask is refused when the token is written, not when it is read.
    for tag in _DISABLED_TAGS:
        env.tags.pop(tag, None)
    for name, func in _FILTERS.items():
        env.add_filter(name, func)
    # Liquid's own filters too: every filter call is bounded in size and time.
    for name, func in list(env.filters.items()):
        env.filters[name] = _bounded(name, func)
    return env


ENVIRONMENT = _build_environment()


# --- public API ----------------------------------------------------------------------------


def compile_expression(source: str) -> BoundTemplate:
    """Parse `source` once (cached) and check that every filter it names exists."""
    if not isinstance(source, str):
        raise ExpressionError("expression must be a string")
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError("expression is too long")
    return _compile_cached(source)


@lru_cache(maxsize=1_024)
def _compile_cached(source: str) -> BoundTemplate:
    try:
        template = ENVIRONMENT.from_string(source)
    except LiquidSyntaxError:
        raise ExpressionError("invalid expression syntax") from None
    except LiquidError:
        raise ExpressionError("invalid expression") from None
    # Liquid only looks filters up while rendering; this makes an unknown one a compile error.
    try:
        names = template.filter_names(include_partials=False)
    except LiquidError:
        raise ExpressionError("invalid expression") from None
    if any(name not in ENVIRONMENT.filters for name in names):
        raise ExpressionError("unknown filter in expression")
    return template


def validate_expression(source: str) -> None:
    compile_expression(source)


def render(
    source: str,
    *,
    data: Any,
    metadata: Mapping[str, str] | None = None,
    allow_empty: bool = True,
) -> str:
    """Render `source` with `data` (and `metadata`, when given) bound.

    With `allow_empty=False` a blank result is an error, for expressions that must produce a
    value (ids, fingerprints).
    """
    template = compile_expression(source)
    namespace: dict[str, Any] = {"data": data}
    if metadata is not None:
        namespace["metadata"] = metadata
    try:
        with _time_budget():
            output = template.render(namespace)
    except ExpressionError:
        raise
    except ResourceLimitError:
        raise ExpressionError("expression exceeded a resource limit") from None
    except Exception:
        # Liquid and built-in filter messages may quote values; none may reach the caller.
        raise ExpressionError("expression could not be rendered") from None
    if not allow_empty and not output.strip():
        raise ExpressionError("expression rendered an empty value")
    return output


def render_mask(mask: Any, *, data: Any) -> Any:
    """Render a mask: an expression string, or a dict/list whose string leaves are expressions.

    Non-string leaves (numbers, booleans, None) are returned unchanged.
    """
    with _time_budget():
        return _walk_mask(mask, lambda leaf: render(leaf, data=data), depth=0)


def validate_mask(mask: Any) -> None:
    """Compile every expression of a mask without rendering it."""
    _walk_mask(mask, validate_expression, depth=0)


def _walk_mask(mask: Any, on_leaf: Callable[[str], Any], *, depth: int) -> Any:
    if depth > MAX_MASK_DEPTH:
        raise ExpressionError("mask is nested too deeply")
    if isinstance(mask, str):
        return on_leaf(mask)
    if mask is None or isinstance(mask, bool | int | float):
        return mask
    if isinstance(mask, Mapping):
        return {key: _walk_mask(value, on_leaf, depth=depth + 1) for key, value in mask.items()}
    if isinstance(mask, list | tuple):
        return [_walk_mask(value, on_leaf, depth=depth + 1) for value in mask]
    raise ExpressionError("mask must be a string, object, array or scalar")
