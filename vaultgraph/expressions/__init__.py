"""Liquid expressions for token ids, masks, search indexes and fingerprints.

Expressions come from API callers and are rendered over plaintext token data, so the
environment is sandboxed (no partial templates, bounded loops, output and nesting) and every
failure surfaces as an `ExpressionError` whose message never carries token data.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from liquid import BoundTemplate, DictLoader, Environment, Mode, RenderContext, Undefined
from liquid.builtin.expressions import LoopExpression
from liquid.builtin.expressions.primitive import RangeLiteral
from liquid.builtin.tags.for_tag import ForNode, ForTag
from liquid.builtin.tags.tablerow_tag import TablerowNode, TablerowTag
from liquid.exceptions import LiquidError, LiquidSyntaxError, ResourceLimitError

from .bounds import bounded_filter, check_time, time_budget
from .errors import (
    DEFAULT_FINGERPRINT_EXPRESSION,
    MAX_EXPRESSION_LENGTH,
    MAX_MASK_DEPTH,
    MAX_OUTPUT_BYTES,
    MAX_RENDER_SECONDS,
    MAX_VALUE_SIZE,
    ExpressionError,
    ExpressionLimitError,
)
from .filters import FILTERS, luhn_valid

__all__ = [
    "DEFAULT_FINGERPRINT_EXPRESSION", "MAX_EXPRESSION_LENGTH", "MAX_MASK_DEPTH", "MAX_OUTPUT_BYTES",
    "MAX_RENDER_SECONDS", "ExpressionError", "ExpressionLimitError", "check_mask_bounds",
    "compile_expression", "compile_mask", "luhn_valid", "render", "render_mask",
    "renders_without_liquid",
    "validate_expression", "validate_mask",
]

_DISABLED_TAGS = ("include", "render")


# --- time: every step of a render is on the clock ----------------------------------------
# A filter call checks the render's budget (bounds.py), but a template can spend without one:
# `contains` and comparisons over a large value, or a loop over them, call no filter. Every
# variable a template reads and every loop iteration checks it too, so a render is stopped
# within one operation of its budget; a loop's source is bounded in size as a filter's
# values are, before Liquid slices or reverses it (`(1..1000000000000) reversed` would
# otherwise be made into a list first).


class _TimedContext(RenderContext):
    __slots__ = ()

    def get(self, *args: Any, **kwargs: Any) -> object:
        check_time()
        return super().get(*args, **kwargs)


class _TimedTemplate(BoundTemplate):
    context_class = _TimedContext


def _timed(items: Iterator[Any]) -> Iterator[Any]:
    for item in items:
        check_time()
        yield item


class _TimedLoop(LoopExpression):
    __slots__ = ()

    @classmethod
    def of(cls, loop: LoopExpression) -> _TimedLoop:
        return cls(loop.token, loop.identifier, loop.iterable, limit=loop.limit,
                   offset=loop.offset, reversed_=loop.reversed, cols=loop.cols)

    def _to_iter(self, obj: object, context: RenderContext) -> tuple[Iterator[Any], int]:
        items, length = super()._to_iter(obj, context)
        if length > MAX_VALUE_SIZE:
            raise ExpressionLimitError()
        return _timed(items), length


class _TimedForNode(ForNode):
    __slots__ = ()

    def __init__(self, token: Any, expression: LoopExpression, block: Any,
                 default: Any = None):
        super().__init__(token, _TimedLoop.of(expression), block, default)


class _TimedForTag(ForTag):
    node_class = _TimedForNode


class _TimedTablerowNode(TablerowNode):
    __slots__ = ()

    def __init__(self, token: Any, expression: LoopExpression, block: Any):
        super().__init__(token, _TimedLoop.of(expression), block)


class _TimedTablerowTag(TablerowTag):
    node_class = _TimedTablerowNode


# A range literal is a Python range, which Liquid compares item by item, in C, where nothing can
# check the budget: `(1..100000000000) contains "a"` would hold the process (and the GIL) for
# hours. A range holds at most this many items (a loop runs at most 1,000 iterations anyway):
# a scan of it takes under a millisecond, and an expression's length bounds how many it makes.
MAX_RANGE_ITEMS = 10_000
_make_range = RangeLiteral._make_range


def _bounded_range(self: RangeLiteral, start: Any, stop: Any) -> range:
    made = _make_range(self, start, stop)
    try:
        items = len(made)
    except OverflowError:
        raise ExpressionLimitError() from None
    if items > MAX_RANGE_ITEMS:
        raise ExpressionLimitError()
    return made


# Liquid makes range literals in its parser, with no way to give it another class: the one
# method that makes them is bounded here, for every template of the process (vaultgraph's
# environment is the only one).
RangeLiteral._make_range = _bounded_range  # type: ignore[method-assign]

# Liquid's `uniq` compares every item with those before it: its work grows as the square of its
# input, within one filter call (where the budget is checked only before it starts).
MAX_UNIQ_ITEMS = 2_000


def _bounded_uniq(uniq: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(uniq)
    def bounded(sequence: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(sequence, list | tuple | range) and len(sequence) > MAX_UNIQ_ITEMS:
            raise ExpressionLimitError()
        return uniq(sequence, *args, **kwargs)

    return bounded


class _SandboxedEnvironment(Environment):
    template_class = _TimedTemplate
    loop_iteration_limit = 1_000
    output_stream_limit = MAX_OUTPUT_BYTES
    local_namespace_limit = MAX_OUTPUT_BYTES
    context_depth_limit = 10
    block_nesting_limit = 10


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
    env.add_tag(_TimedForTag)
    env.add_tag(_TimedTablerowTag)
    for name, func in FILTERS.items():
        env.add_filter(name, func)
    env.filters["uniq"] = _bounded_uniq(env.filters["uniq"])
    # Liquid's own filters too: every filter call is bounded in size and time.
    for name, func in list(env.filters.items()):
        env.filters[name] = bounded_filter(name, func)
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

    The shapes a mask leaf renders without Liquid (`_leaf_plan`: a plain reference, or one of
    the vault's own filters over one) render so here too when the value is text, to the text
    Liquid renders (tests/unit/test_expressions.py compares them): a card's fingerprint,
    `{{ data.number }}`, is rendered on every create and every tokenized card.
    """
    output = _render_direct(source, data) if type(source) is str else None
    if output is None:
        output = _render_liquid(source, data, metadata)
    if not allow_empty and not output.strip():
        raise ExpressionError("expression rendered an empty value")
    return output


def _render_direct(source: str, data: Any) -> str | None:
    """`source` rendered without Liquid, or None when its shape or its value needs Liquid."""
    plan = _leaf_plan(source)
    if plan is None:
        return None
    value = _lookup(data, plan.steps)
    if type(value) is not str or len(value) > _WITHIN_OUTPUT_LIMIT:
        return None
    return value if type(plan) is _Reference else _render_filtered(plan, value)


def _render_liquid(source: str, data: Any, metadata: Mapping[str, str] | None) -> str:
    """`source` rendered through Liquid."""
    template = compile_expression(source)
    namespace: dict[str, Any] = {"data": data}
    if metadata is not None:
        namespace["metadata"] = metadata
    try:
        with time_budget():
            output = template.render(namespace)
    except ExpressionError:
        raise
    except ResourceLimitError:
        raise ExpressionLimitError() from None
    except Exception:
        # Liquid and built-in filter messages may quote values; none may reach the caller.
        raise ExpressionError("expression could not be rendered") from None
    return output


def render_mask(mask: Any, *, data: Any) -> Any:
    """Render a mask: an expression string, or a dict/list whose string leaves are expressions.

    Non-string leaves (numbers, booleans, None) are returned unchanged. A leaf that only names a
    scalar of the data (`{{ data.expiration_month }}`) shows that value with its JSON type, as
    a mask that copies a field should; it also needs no template render. A member of an object
    whose leaf only names a value the data does not have is left out (a card without an
    expiration shows no `expiration_month`); elsewhere such a leaf is empty, as in Liquid.
    """
    with time_budget():
        shown = _walk_mask(mask, lambda leaf: _render_leaf(leaf, data), depth=0)
    return "" if shown is _MISSING else shown


def renders_without_liquid(expression: Any) -> bool:
    """Whether `expression` (an expression, or a mask: text, or an object or array whose text
    leaves are expressions) holds only literal text and the shapes rendered without Liquid
    (`_leaf_plan`: a look-up, or one of the vault's own filters over one), at most
    `_DIRECT_LEAVES_AT_MOST` leaves: each a bounded step over bounded data, cheap enough for the
    event loop whatever the caller wrote."""
    leaves = 0
    stack = [(expression, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            leaves += 1
            if leaves > _DIRECT_LEAVES_AT_MOST or (
                    "{" in value and _leaf_plan(value) is None):  # else literal text
                return False
        elif isinstance(value, Mapping | list | tuple):
            if depth >= MAX_MASK_DEPTH:
                return False
            items = value.values() if isinstance(value, Mapping) else value
            stack.extend((item, depth + 1) for item in items)
    return True


def check_mask_bounds(mask: Any, *, data: Any) -> None:
    """Render `mask` over the data it is written with: `ExpressionLimitError` over a bound.

    A mask is otherwise only rendered when read, so a mask over a size or time bound would be
    accepted on write and show no data on every read. Other render failures are left to the
    read (they depend on the data, which a later update may change).
    """
    try:
        render_mask(mask, data=data)
    except ExpressionLimitError:
        raise
    except ExpressionError:
        pass


# `{{ data }}`, `{{ data.a.b }}`, `{{ data.items[0] }}`: a plain reference, no filters.
_PLAIN_REFERENCE = re.compile(r"\{\{-?\s*data((?:\.[A-Za-z_][\w-]*|\[[0-9]{1,6}\])*)\s*-?\}\}")
# `{{ data.a-}}`: Liquid reads `-}}` as whitespace control, where a key may end in `-`.
_KEY_THEN_TRIM = re.compile(r"[\w-]-\}\}")
_REFERENCE_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[([0-9]{1,6})\]")
# `**** {{ data.number | reveal_last: 4, "*" }}`: literal text (no braces) around one of the
# vault's own string filters over a plain reference, with literal arguments (small integers,
# quoted text without backslashes or braces), no whitespace control.
_ARGUMENT = r"""[0-9]{1,6}|"[^"\\{}]*"|'[^'\\{}]*'"""
# Between the tag's tokens only the whitespace Liquid's expression lexer skips.
_WS = r"[ \t\r\n]*"
_FILTERED_REFERENCE = re.compile(
    rf"([^{{}}]*)\{{\{{\s*data((?:\.[A-Za-z_][\w-]*|\[[0-9]{{1,6}}\])*){_WS}\|{_WS}([a-z_0-9]+)"
    rf"(?:{_WS}:{_WS}((?:{_ARGUMENT})(?:{_WS},{_WS}(?:{_ARGUMENT}))*))?\s*\}}\}}([^{{}}]*)")
_ARGUMENTS = re.compile(_ARGUMENT)
# The filters a filtered reference may call directly: each returns text, and is given the text
# the reference names exactly as Liquid gives it (a plain str, unchanged).
_DIRECT_FILTERS = frozenset({"reveal_last", "reveal", "last4", "pad_left", "pad_right",
                             "card_mask", "card_bin", "stringify", "json_stringify",
                             "to_string", "to_base64", "to_base16"})
_MISSING = object()
# Text of at most this many characters is within the output limit in UTF-8 bytes (4 at most a
# character), so only longer text needs encoding to be checked; `render` hands back a plain
# reference's text as it is only up to this length.
_WITHIN_OUTPUT_LIMIT = MAX_OUTPUT_BYTES // 4
# What a reference shows as it is, by exact type (the common case; subclasses by isinstance).
_SCALARS = frozenset({str, int, float, bool})


@dataclass(frozen=True, slots=True)
class _Reference:
    """A leaf that shows one value of the data as it is."""
    steps: tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class _Filtered:
    """A leaf that is literal text around one direct filter over one value of the data."""
    prefix: str
    steps: tuple[str | int, ...]
    name: str
    arguments: tuple[str | int, ...]
    suffix: str


@lru_cache(maxsize=1_024)
def _leaf_plan(leaf: str) -> _Reference | _Filtered | None:
    """How a mask leaf renders without Liquid: a reference, a direct filter, or None (Liquid).

    Masks are written once and read on every token of every page; rendering the common shapes
    directly (the same filter functions, bounds and output limit) saves a template render per
    leaf. tests/unit/test_expressions.py checks the direct render against Liquid's.
    """
    if len(leaf) > MAX_EXPRESSION_LENGTH or _KEY_THEN_TRIM.search(leaf):
        return None
    match = _PLAIN_REFERENCE.fullmatch(leaf)
    if match is not None:
        return _Reference(_steps(match.group(1)))
    match = _FILTERED_REFERENCE.fullmatch(leaf)
    if match is None or match.group(3) not in _DIRECT_FILTERS:
        return None
    prefix, path, name, arguments, suffix = match.groups()
    values = tuple(int(a) if a[0].isdigit() else a[1:-1]
                   for a in _ARGUMENTS.findall(arguments or ""))
    return _Filtered(prefix, _steps(path), name, values, suffix)


def _steps(path: str) -> tuple[str | int, ...]:
    return tuple(key if key else int(index) for key, index in _REFERENCE_STEP.findall(path))


def _render_leaf(leaf: str, data: Any) -> Any:
    return _render_planned(leaf, _leaf_plan(leaf), data)


def _render_planned(leaf: str, plan: _Reference | _Filtered | None, data: Any) -> Any:
    if type(plan) is _Reference:
        value = _lookup(data, plan.steps)
        if isinstance(value, str | int | float):  # bool is an int
            return value
        if value is _MISSING:
            return _MISSING  # left out of an object; "" elsewhere (as Liquid renders it)
        if value is None:
            return ""  # as Liquid renders a null value
    elif type(plan) is _Filtered:
        value = _lookup(data, plan.steps)
        if type(value) is str:
            return _render_filtered(plan, value)
    return render(leaf, data=data)


def _render_filtered(plan: _Filtered, value: str) -> str:
    """`plan` over `value` as Liquid renders it: the bounded filter, then the output limit."""
    return _filtered_text(ENVIRONMENT.filters[plan.name], value, plan.arguments, plan.prefix,
                          plan.suffix)


def _filtered_text(apply: Callable[..., Any], value: str, arguments: tuple[str | int, ...],
                   prefix: str, suffix: str) -> str:
    """A filtered leaf's text: the bounded filter `apply` over `value`, between `prefix` and
    `suffix`, under the output limit."""
    try:
        shown = apply(value, *arguments)
    except ExpressionError:
        raise
    except Exception:
        raise ExpressionError("expression could not be rendered") from None
    if not isinstance(shown, str):
        raise ExpressionError("expression could not be rendered")
    output = f"{prefix}{shown}{suffix}" if prefix or suffix else shown
    if len(output) > _WITHIN_OUTPUT_LIMIT:
        try:
            size = len(output.encode())
        except UnicodeEncodeError:
            raise ExpressionError("expression could not be rendered") from None
        if size > MAX_OUTPUT_BYTES:
            raise ExpressionLimitError()
    return output


def _lookup(data: Any, steps: tuple[str | int, ...]) -> Any:
    value = data
    for step in steps:
        if type(step) is str:
            # A dict (the data as decrypted) before the abstract Mapping check, which is slow.
            if (type(value) is dict or isinstance(value, Mapping)) and step in value:
                value = value[step]
                continue
        elif isinstance(value, list) and step < len(value):
            value = value[step]
            continue
        return _MISSING
    return value


def compile_mask(mask: Any) -> Callable[[Any], Any]:
    """`render_mask(mask, data=...)` for a mask shown on many tokens (a type's default): its
    walk and each leaf's plan made once. A mask of at most `_DIRECT_LEAVES_AT_MOST` leaves that
    all render directly (`_leaf_plan`) is walked without Liquid and without a deadline of its
    own: each leaf is a look-up or one bounded filter over a bounded value (far below the
    render budget), and the filters still check the request's deadline when one is in force;
    a leaf whose value would need Liquid (a value of another type) has the whole mask rendered
    by `render_mask` instead, under its deadline. Any other mask is rendered by `render_mask`."""
    leaves: list[str] = []
    try:
        walk = _compile_walk(mask, leaves, depth=0)
    except (ExpressionError, _NeedsLiquid):
        walk = None
    if walk is None or len(leaves) > _DIRECT_LEAVES_AT_MOST:
        return lambda data: render_mask(mask, data=data)

    def render_compiled(data: Any) -> Any:
        try:
            shown = walk(data)
        except _NeedsLiquid:
            return render_mask(mask, data=data)
        return "" if shown is _MISSING else shown

    return render_compiled


_DIRECT_LEAVES_AT_MOST = 16


class _NeedsLiquid(Exception):
    """A mask leaf that does not render directly, when compiled or for the data at hand."""


def _compile_walk(mask: Any, leaves: list[str], *, depth: int) -> Callable[[Any], Any]:
    """`_walk_mask(mask, _render_leaf, ...)` as a function of the data, for leaves that render
    directly (`_direct_leaf`); `leaves` gathers them."""
    if depth > MAX_MASK_DEPTH:
        raise ExpressionError("mask is nested too deeply")
    if isinstance(mask, str):
        leaves.append(mask)
        return _direct_leaf(mask)
    if mask is None or isinstance(mask, bool | int | float):
        return lambda data: mask
    if isinstance(mask, Mapping):
        members = [(key, _compile_walk(value, leaves, depth=depth + 1))
                   for key, value in mask.items()]

        def walk_object(data: Any) -> dict:
            out = {}
            for key, walk in members:
                shown = walk(data)
                if shown is not _MISSING:
                    out[key] = shown
            return out

        return walk_object
    if isinstance(mask, list | tuple):
        items = [_compile_walk(value, leaves, depth=depth + 1) for value in mask]
        return lambda data: [_blank(walk(data)) for walk in items]
    raise ExpressionError("mask must be a string, object, array or scalar")


def _direct_leaf(leaf: str) -> Callable[[Any], Any]:
    """`_render_planned(leaf, plan, data)` as a function of the data for a leaf with a plan,
    raising `_NeedsLiquid` where that would render the leaf with Liquid. A leaf over one member
    of an object (a type's default mask's) reads it straight from a dict."""
    plan = _leaf_plan(leaf)
    if plan is None:
        raise _NeedsLiquid()
    steps = plan.steps
    key = steps[0] if len(steps) == 1 and type(steps[0]) is str else None
    if type(plan) is _Reference:
        def reference(data: Any) -> Any:
            value = (data.get(key, _MISSING) if key is not None and type(data) is dict
                     else _lookup(data, steps))
            if type(value) in _SCALARS or isinstance(value, str | int | float):
                return value
            if value is _MISSING:
                return _MISSING
            if value is None:
                return ""
            raise _NeedsLiquid()

        return reference
    filtered = cast(_Filtered, plan)
    # The filter is looked up once: the compiled mask renders it for every token it shows.
    apply = ENVIRONMENT.filters[filtered.name]
    arguments, prefix, suffix = filtered.arguments, filtered.prefix, filtered.suffix

    def filtered_value(data: Any) -> Any:
        value = (data.get(key, _MISSING) if key is not None and type(data) is dict
                 else _lookup(data, steps))
        if type(value) is str:
            return _filtered_text(apply, value, arguments, prefix, suffix)
        raise _NeedsLiquid()

    return filtered_value


def validate_mask(mask: Any) -> None:
    """Compile every expression of a mask without rendering it."""
    _walk_mask(mask, validate_expression, depth=0)


def _blank(value: Any) -> Any:
    return "" if value is _MISSING else value


def _walk_mask(mask: Any, on_leaf: Callable[[str], Any], *, depth: int) -> Any:
    if depth > MAX_MASK_DEPTH:
        raise ExpressionError("mask is nested too deeply")
    if isinstance(mask, str):
        return on_leaf(mask)
    if mask is None or isinstance(mask, bool | int | float):
        return mask
    if isinstance(mask, Mapping):
        out = {}
        for key, value in mask.items():
            shown = _walk_mask(value, on_leaf, depth=depth + 1)
            if shown is not _MISSING:
                out[key] = shown
        return out
    if isinstance(mask, list | tuple):
        return [_blank(_walk_mask(value, on_leaf, depth=depth + 1)) for value in mask]
    raise ExpressionError("mask must be a string, object, array or scalar")

