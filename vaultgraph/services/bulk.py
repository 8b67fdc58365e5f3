"""Bulk use cases: tokenize many create requests at once, detokenize a payload.

Tokenize reuses the token service's create path item by item (validation, container rights,
id, encryption, keyed digests), then writes every valid item in one statement. Detokenize reads
every token a payload names in one statement and shows each under the caller's transform.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..audit.context import expect, note_tokens
from ..auth.permissions import TOKEN_READ
from ..auth.principal import Principal
from ..errors import Conflict, Invalid, VaultError, add_error
from ..expressions import ExpressionError, compile_expression, render
from ..repository.tokens import NewToken, TokenFilter, TokenRepository
from . import expiry
from .rendering import Renderer
from .tokens import Prepared, TokenService, meta_kvs, renders_caller_expressions

ID_TAKEN = "A token with that id exists."
DUPLICATE_ID = "Another item of this request has the same id."
# `{{ <token id> }}` or `{{ <token id> | <filters> }}`, the whole string. A token id holds no
# whitespace, `|`, `{` or `}` (tokens/fields.py), so the id ends where one of those starts.
EXPRESSION = re.compile(r"\{\{\s*(?P<id>[^\s|{}]+)\s*(?:\|(?P<filters>[^{}]*))?\}\}")
NOT_AN_EXPRESSION = ("must be a whole token expression, `{{ <token id> }}` or "
                     "`{{ <token id> | <filters> }}`, without nesting")
BAD_FILTERS = "has filters that are unknown or invalid"
UNREADABLE = "names no token the application may read"
UNRENDERED = "could not be rendered"
MAX_DEPTH = 64  # JSON nesting of a detokenize payload


@dataclass(frozen=True, slots=True)
class Expression:
    path: tuple[str | int, ...]
    token_id: str
    filters: str | None


class BulkService:
    def __init__(self, tokens: TokenService, repo: TokenRepository, renderer: Renderer, *,
                 max_items: int):
        self.tokens = tokens
        self.repo = repo
        self.renderer = renderer
        self.max_items = max_items

    # -- tokenize -----------------------------------------------------------------------------

    async def tokenize(self, principal: Principal,
                       items: list[dict | VaultError]) -> list[dict | VaultError]:
        """Each item's answer, in order: the token body, or the item's domain error. Items are
        independent; the valid ones are written in one statement."""
        results: list[dict | VaultError | None] = [None] * len(items)
        ready: dict[int, Prepared] = {}

        def prepare_all() -> None:
            seen: set[str] = set()
            for index, item in enumerate(items):
                if isinstance(item, VaultError):
                    results[index] = item
                    continue
                try:
                    prepared = self.tokens.prepare(principal, item)
                except VaultError as exc:
                    results[index] = exc
                    continue
                if prepared.id in seen:
                    results[index] = Conflict(DUPLICATE_ID)
                    continue
                seen.add(prepared.id)
                ready[index] = prepared

        # Up to 100 items' id, fingerprint and search-index expressions and masks may be
        # caller-written: they render off the event loop, under the request's one render budget
        # (past it, the remaining items fail alone with a 400 on the expression). Items that
        # render only their types' own expressions are prepared inline, as a single create is,
        # under the same budget.
        await self.renderer.run_where(any(
            renders_caller_expressions(item) for item in items
            if not isinstance(item, VaultError)), prepare_all)
        if ready:
            note_tokens(tuple(p.id for p in ready.values()))  # in the write's own audit event
            if not any(p.draft.deduplicate for p in ready.values()):
                # Without dedup each item ends created, shown under its own transform: the
                # write may store the request's event as the request is expected to end (an
                # item whose id turns out taken ends it otherwise, and its event is written
                # again). An item that may find its twin cannot say how it ends. (The principal
                # keeps each decision: items sharing containers decide once.)
                expect(200, *(principal.decide(p.draft.containers, TOKEN_READ).transform
                              for p in ready.values()))
            created = await self.repo.create_many(
                tenant_id=principal.tenant_id, expired=(expiry.ACTOR, expiry.REASON),
                rows=[NewToken(index, p.id, p.props, p.draft.expires_at,
                               meta_kvs(p.draft.metadata), p.draft.deduplicate, p.digests)
                      for index, p in ready.items()])
            shown, places = [], []
            for index, prepared in ready.items():
                result = created.get(index)
                if result is None:
                    results[index] = Conflict(ID_TAKEN)
                    continue
                shown.append(self.tokens.created_answer(principal, prepared, result.token,
                                                        result.deduplicated))
                places.append(index)
            for index, body in zip(places, await self.tokens.render(principal, shown),
                                   strict=True):
                results[index] = body
        return [r for r in results if r is not None]

    # -- detokenize ---------------------------------------------------------------------------

    async def detokenize(self, principal: Principal, payload: Any) -> Any:
        """`payload` with each token expression replaced by the token's data as the caller may
        see it (its read transform); one 400 naming every expression that fails, with the same
        message for an unknown id and an unreadable one."""
        found, errors = _expressions(payload)
        if len({e.token_id for e in found}) > self.max_items or len(found) > self.max_items:
            raise Invalid(errors={"body": [
                f"must hold at most {self.max_items} token expressions"]})
        for expression in found:
            if expression.filters is not None:
                try:
                    compile_expression(_filtered(expression.filters))
                except ExpressionError:
                    errors.setdefault(_name(expression.path), []).append(BAD_FILTERS)
        if errors:
            raise Invalid("The payload holds invalid token expressions.", errors=errors)
        if not found:
            return payload
        ids = list(dict.fromkeys(e.token_id for e in found))
        note_tokens(ids)  # every id asked for is in the event, found or not
        nodes = await self.repo.page(
            tenant_id=principal.tenant_id, prefixes=principal.prefixes(TOKEN_READ), after="",
            limit=len(ids), where=TokenFilter(ids=tuple(ids)))
        bodies = await self.tokens.present_all(principal, nodes)
        shown = {body["id"]: body.get("data") for body in bodies}
        missing = {_name(e.path): [UNREADABLE] for e in found if e.token_id not in shown}
        if missing:
            raise Invalid("Some token expressions name no token the application may read.",
                          errors=missing)

        def substitute() -> dict[Path, Any]:
            values: dict[Path, Any] = {}
            for e in found:
                value = shown[e.token_id]
                if e.filters is not None:
                    try:
                        value = render(_filtered(e.filters), data=value)
                    except ExpressionError:
                        errors.setdefault(_name(e.path), []).append(UNRENDERED)
                        continue
                values[e.path] = value
            return values

        if any(e.filters is not None for e in found):
            values = await self.renderer.run(substitute)
        else:
            values = substitute()
        if errors:
            raise Invalid("Some token expressions could not be rendered.", errors=errors)
        return _replace(payload, values)


def _filtered(filters: str) -> str:
    return "{{ data | " + filters.strip() + " }}"


Path = tuple[str | int, ...]


def _name(path: Path) -> str:
    """A place as validation errors name fields: `a.0.b`; `body` for the payload itself."""
    return ".".join(str(p) for p in path) or "body"


def _walk(payload: Any) -> Iterator[tuple[Path, str]]:
    """(path, string) of every string value in `payload`, without recursion; a payload nested
    deeper than MAX_DEPTH is refused (the copy with the values put in recurses)."""
    stack: list[tuple[Path, Any]] = [((), payload)]
    while stack:
        path, value = stack.pop()
        if len(path) > MAX_DEPTH:
            raise Invalid(errors={"body": [f"must be nested at most {MAX_DEPTH} levels deep"]})
        if isinstance(value, str):
            yield path, value
        elif isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in enumerate(value))


def _expressions(payload: Any) -> tuple[list[Expression], dict[str, list[str]]]:
    found: list[Expression] = []
    errors: dict[str, list[str]] = {}
    for path, text in _walk(payload):
        if "{{" not in text and "}}" not in text:
            continue
        match = EXPRESSION.fullmatch(text.strip())
        filters = match["filters"] if match is not None else None
        if match is None or (filters is not None and not filters.strip()):
            if not add_error(errors, _name(path),
                             [NOT_AN_EXPRESSION if match is None else BAD_FILTERS]):
                break  # the answer is a 400 listing the first ones; no need for the rest
            continue
        found.append(Expression(path, match["id"], filters))
    return found, errors


def _replace(payload: Any, values: dict[Path, Any]) -> Any:
    """A copy of `payload` with the value at each path of `values` put in."""
    def rebuild(path: Path, value: Any) -> Any:
        if isinstance(value, str):
            return values.get(path, value)
        if isinstance(value, dict):
            return {k: rebuild((*path, k), v) for k, v in value.items()}
        if isinstance(value, list):
            return [rebuild((*path, i), v) for i, v in enumerate(value)]
        return value

    return rebuild((), payload)
