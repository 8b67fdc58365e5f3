"""The search query language (`POST /tokens/search`), parsed by lark into a small typed tree.

    type:card AND metadata.customer_id:"C-1001" AND NOT container:/pci/low/
    descendant:cust-ada OR created_at:[2026-01-01 TO *]

Terms are `field:value` (a value may be quoted, with `\\"` and `\\\\` escapes); `AND`, `OR`,
`NOT` and parentheses combine them, `AND` binding tighter than `OR`; two terms side by side are
ANDed. Dates take a single day or instant, or a range `[a TO b]` (inclusive) / `{a TO b}`
(exclusive), `*` for an open end. The grammar is the whole syntax: anything else is a 400 naming
the position (counted from 1) and the problem, never echoing the query's text, which may hold
data being searched for.

The tree holds the values as given (a `data` value is plaintext here); the service turns `data`
values into blind-index digests before anything leaves the process (`with_values`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta

from lark import Lark, Token, Transformer_NonRecursive
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from ..errors import invalid
from ..tokens.fields import INSTANT_YEARS, metadata_filter_key, utc_instant, validate_token_id
from ..tokens.schemas import metadata_problem

QUERY_FIELD = "query"
# Fields that match one exact value (metadata: case-insensitively; container: a path prefix).
EXACT_FIELDS = ("id", "type", "container", "fingerprint", "data")
DATE_FIELDS = ("created_at", "expires_at")
GRAPH_FIELDS = ("parent", "child", "ancestor", "descendant")
FIELDS = (*EXACT_FIELDS, "metadata.<key>", *DATE_FIELDS, *GRAPH_FIELDS)
# Fields that take a token id: a value that could be none is refused, not searched for.
ID_FIELDS = ("id", *GRAPH_FIELDS)
EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)

_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr (_OR and_expr)*      -> or_
?and_expr: not_expr (_AND? not_expr)*   -> and_
?not_expr: _NOT not_expr                -> not_
         | "(" or_expr ")"
         | term
term: FIELD ":" (WORD | PHRASE | range)
range: (INCL_OPEN | EXCL_OPEN) bound _TO bound (INCL_CLOSE | EXCL_CLOSE)
?bound: STAR | BOUND | PHRASE

_AND.3: /AND(?![^\s()])/
_OR.3: /OR(?![^\s()])/
_NOT.3: /NOT(?![^\s()])/
_TO.3: /TO(?![^\s\]}])/
FIELD.2: /[A-Za-z_][A-Za-z0-9_]*(\.[^\s:()\[\]{}"\\]+)?(?=:)/
STAR.2: /\*(?![^\s\]}])/
WORD: /[^\s()\[\]{}"]+/
BOUND: /[^\s\[\]{}"]+/
PHRASE: /"(?:[^"\\]|\\.)*"/
INCL_OPEN: "["
EXCL_OPEN: "{"
INCL_CLOSE: "]"
EXCL_CLOSE: "}"
%ignore /\s+/
"""

# Compiled once: the LALR tables are built at import, not per request.
_PARSER = Lark(_GRAMMAR, parser="lalr", lexer="contextual", propagate_positions=True,
               maybe_placeholders=False)


@dataclass(frozen=True, slots=True)
class Limits:
    max_length: int = 2000
    max_terms: int = 20
    max_depth: int = 6


@dataclass(frozen=True, slots=True)
class Term:
    """`field:value`; for metadata, `key` is the lower-cased key and `field` is "metadata"."""

    field: str
    value: str
    key: str | None = None
    depth: int = field(default=1, compare=False)


@dataclass(frozen=True, slots=True)
class Range:
    """A date field between two instants (open ends are EARLIEST / LATEST)."""

    field: str
    low: datetime
    high: datetime
    low_inclusive: bool = True
    high_inclusive: bool = True
    depth: int = field(default=1, compare=False)


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Node, ...]
    depth: int = field(default=1, compare=False)


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Node, ...]
    depth: int = field(default=1, compare=False)


@dataclass(frozen=True, slots=True)
class Not:
    child: Node
    depth: int = field(default=1, compare=False)


Leaf = Term | Range
Node = Term | Range | And | Or | Not


def leaves(node: Node) -> Iterator[Leaf]:
    """The terms of a tree, left to right (iterative: depth is bounded, but cheaply so)."""
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (Term, Range)):
            yield current
        elif isinstance(current, Not):
            stack.append(current.child)
        else:
            stack.extend(reversed(current.children))


def with_values(node: Node, fn: Callable[[Term], str]) -> Node:
    """The same tree with each term's value replaced by `fn(term)` (the service blinds `data`
    values and puts metadata in its indexed form this way)."""
    if isinstance(node, Term):
        return replace(node, value=fn(node))
    if isinstance(node, Range):
        return node
    if isinstance(node, Not):
        return replace(node, child=with_values(node.child, fn))
    return replace(node, children=tuple(with_values(c, fn) for c in node.children))


def _fail(position: int, problem: str):
    return invalid(QUERY_FIELD, f"position {position}: {problem}")


def _unquote(raw: str) -> str:
    if raw.startswith('"'):
        body = raw[1:-1]
        out, escaped = [], False
        for ch in body:
            if escaped:
                out.append(ch)
                escaped = False
            elif ch == "\\":
                escaped = True
            else:
                out.append(ch)
        return "".join(out)
    return raw


def _instant(raw: str, position: int, name: str) -> tuple[datetime, bool]:
    """A date or date-time (ISO 8601; no offset = UTC); True when it is a whole day."""
    try:
        if len(raw) == 10:
            return datetime.combine(date.fromisoformat(raw), time(), UTC), True
        value = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith("Z") else raw)
        # In UTC here: an instant that UTC cannot hold (year 0 or 10000) is refused now, not
        # by the driver.
        return utc_instant(value), False
    except ValueError:
        raise _fail(position, f"`{name}` takes an ISO 8601 date (2026-11-23) or date-time "
                              f"(2026-11-23T10:00:00Z) {INSTANT_YEARS}") from None


@dataclass(frozen=True, slots=True)
class _RawRange:
    opening: Token
    low: Token
    high: Token
    closing: Token

    def build(self, name: str) -> Range:
        bounds = []
        for token, default in ((self.low, EARLIEST), (self.high, LATEST)):
            if token.type == "STAR":
                bounds.append(default)
            else:
                bounds.append(_instant(_unquote(str(token)), token.start_pos + 1, name)[0])
        return Range(name, bounds[0], bounds[1], self.opening.type == "INCL_OPEN",
                     self.closing.type == "INCL_CLOSE")


class _Build(Transformer_NonRecursive):
    """lark's tree → the typed tree, bottom-up without recursion (a deep query cannot blow the
    stack before the depth limit refuses it)."""

    def term(self, items):
        name_token: Token = items[0]
        value = items[1]
        name = str(name_token)
        position = name_token.start_pos + 1
        key = metadata_filter_key(name)
        if key is not None:
            text = self._text(value, name, position)
            # Named `metadata.…`: the key is the caller's text, as the value is.
            problem = metadata_problem(name.partition(".")[2], text)
            if problem is not None:
                raise _fail(position, f"`metadata.…` {problem}")
            return Term("metadata", text, key=key)
        if name in DATE_FIELDS:
            if isinstance(value, _RawRange):
                return value.build(name)
            start, whole_day = _instant(self._text(value, name, position), position, name)
            if whole_day:
                if start.date() == date.max:
                    return Range(name, start, LATEST)
                return Range(name, start, start + timedelta(days=1), True, False)
            return Range(name, start, start)
        if name in EXACT_FIELDS or name in GRAPH_FIELDS:
            text = self._text(value, name, position)
            if name == "container":
                if not text.startswith("/"):
                    raise _fail(position, "`container` takes a path that starts with `/`")
                text = text.lower()
            elif name in ID_FIELDS:
                try:
                    validate_token_id(text)
                except ValueError as exc:
                    raise _fail(position, f"`{name}` takes a token id that {exc}") from None
            return Term(name, text)
        # Only the part before a dot is named: what follows could be anything the caller typed.
        shown = name.split(".", 1)[0] + (".…" if "." in name else "")
        raise _fail(position, f"unknown field `{shown}`; the fields are {', '.join(FIELDS)}")

    @staticmethod
    def _text(value, name: str, position: int) -> str:
        if isinstance(value, _RawRange):
            raise _fail(position, f"`{name}` does not take a range (only "
                                  f"{' and '.join(DATE_FIELDS)} do)")
        text = _unquote(str(value))
        if not text:
            raise _fail(position, f"`{name}` needs a value")
        return text

    def range(self, items):
        return _RawRange(*items)

    def and_(self, items):
        if len(items) == 1:
            return items[0]
        return And(tuple(items), 1 + max(i.depth for i in items))

    def or_(self, items):
        if len(items) == 1:
            return items[0]
        return Or(tuple(items), 1 + max(i.depth for i in items))

    def not_(self, items):
        if isinstance(items[0], Not):  # NOT NOT x is x (and may drive the query)
            return replace(items[0].child, depth=items[0].depth + 1)
        return Not(items[0], 1 + items[0].depth)


_BUILD = _Build()

_NAMES = {"_AND": "`AND`", "_OR": "`OR`", "_NOT": "`NOT`", "_TO": "`TO`", "LPAR": "`(`",
          "RPAR": "`)`", "COLON": "`:`", "INCL_OPEN": "`[`", "EXCL_OPEN": "`{`",
          "INCL_CLOSE": "`]`", "EXCL_CLOSE": "`}`", "STAR": "`*`"}


def _syntax_problem(exc: UnexpectedInput, text: str) -> tuple[int, str]:
    """Where and what, in words that never quote the query's values."""
    if isinstance(exc, UnexpectedEOF) or (
            isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        return len(text) + 1, "the query ends too early (a term, value or `)` is missing)"
    if isinstance(exc, UnexpectedToken):
        position = exc.token.start_pos + 1 if exc.token.start_pos is not None else 1
        if "_TO" in exc.expected:
            return position, "expected `TO` in the range"
        if exc.token.type in ("WORD", "PHRASE", "BOUND") and "FIELD" in exc.expected:
            return position, "expected a term `field:value`"
        return position, f"unexpected {_NAMES.get(exc.token.type, 'value')}"
    if isinstance(exc, UnexpectedCharacters):
        position = exc.pos_in_stream + 1
        allowed = exc.allowed or set()
        if "FIELD" in allowed:
            return position, "expected a term `field:value`"
        if "_TO" in allowed:
            return position, "expected `TO` in the range"
        return position, "unexpected character"
    return 1, "the query is malformed"


def parse(text: str, limits: Limits) -> Node:
    """The typed tree of a query, or `errors.Invalid` on field `query`."""
    if not text or not text.strip():
        raise invalid(QUERY_FIELD, "must not be empty")
    if len(text) > limits.max_length:
        raise invalid(QUERY_FIELD, f"must be at most {limits.max_length} characters")
    try:
        raw = _PARSER.parse(text)
    except UnexpectedInput as exc:
        position, problem = _syntax_problem(exc, text)
        raise _fail(position, problem) from None
    try:
        tree = _BUILD.transform(raw)
    except VisitError as exc:  # a term refused while the tree was built
        raise exc.orig_exc from None
    if tree.depth > limits.max_depth:
        raise invalid(QUERY_FIELD, f"nests at most {limits.max_depth} levels deep")
    count = sum(1 for _ in leaves(tree))
    if count > limits.max_terms:
        raise invalid(QUERY_FIELD, f"must hold at most {limits.max_terms} terms")
    return tree
