"""The outbound proxy: an application uses tokens in a request to a fixed third party without
ever seeing their values (docs/proxy.md).

Management keeps each tenant's proxies (a name and a destination URL the address policy
accepts). A call names a proxy and a path under its destination; every token expression
`{{ <token id> }}` / `{{ <token id> | <filter> }}` in the body (JSON, form-encoded, XML or
text/plain) and in the headers the proxy allows is replaced by the token's revealed data, under
`token:use` on the token's containers (the caller's read transform does not matter: `token:use`
reveals to the destination, never to the caller). Expressions are the detokenize ones with one
filter from a short allow-list, or a `json: "<$.path>"` selection then one of them (a refused
or failed render must not tell the caller anything about the data); an unknown, foreign or
unusable token is one 400 with the same text for each, and then nothing is sent. A `{{` in the
path, the query or a forwarded header the proxy does not allow is a 400: it is replaced nowhere
else, and would reach the destination as literal text.

Nothing here keeps or logs a body, a header value or the destination's answer.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import unicodedata
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit
from xml.sax.saxutils import escape as xml_escape

import orjson

from ..audit.context import note_reason, note_tokens
from ..auth.permissions import TOKEN_USE
from ..auth.principal import Principal
from ..errors import (
    DestinationFailed,
    Invalid,
    NotFound,
    RateLimited,
    TooLarge,
    add_error,
    invalid,
)
from ..expressions import ExpressionError
from ..expressions.filters import (
    as_text,
    card_bin,
    card_exp,
    card_mask,
    json_filter,
    last4,
    reveal_last,
)
from ..outbound import AddressPolicy, OutboundClient, OutboundError
from ..repository.proxies import Proxy, ProxyRepository, Route
from ..repository.tokens import TokenFilter, TokenRepository
from ..tokens.stored import StoredToken
from ..tokens.view import decrypt_field
from .applications import parse_id, parse_position
from .bulk import BAD_FILTERS, EXPRESSION, NOT_AN_EXPRESSION
from .rendering import Renderer

__all__ = ["Call", "Forwarded", "Proxy", "ProxyService", "check_tail"]

NO_SUCH_PROXY = "No proxy with this id."
MAX_EXPRESSIONS = 100  # per call, body and headers together
MAX_BYTES = 1_048_576  # each way
CALL_TIME_LIMIT = 30.0  # seconds, from the call's start to the answer's last byte
MAX_HEADER_ALLOWLIST = 20
UNUSABLE = "names no token the application may use"
UNRENDERED = "could not be rendered"
RENDER_FAILED = "Some token expressions could not be rendered."
TOO_MANY = f"must hold at most {MAX_EXPRESSIONS} token expressions"
HAS_QUERY = "must not hold a query (the call's query is appended)"
NOT_A_HEADER = "must be header names"
DROPPED_HEADER = "must not name a header the proxy drops or sets itself"
PATH_ESCAPES = ("must stay under the proxy's destination: no `.` or `..` segments (nor `..;`, "
                "segments of dots and spaces, trailing dots or spaces, dot look-alikes), control "
                "characters, encoded slashes or dots, empty segments or absolute URLs")
PATH_EXPRESSION = ("must not hold `{{`: token expressions are replaced in the body and in the "
                   "headers the proxy allows, never in the path")
NOT_REPLACED_HERE = ("must not hold `{{`: token expressions are replaced only in the body and in "
                     "the headers the proxy's header_allowlist names")
PATH_CHARACTERS = ("may hold only the characters a URL path allows as they are (letters, digits "
                   "and -._~!$&'()*+,;=:@), any other percent-encoded (`{` as `%7B`)")
PATH_PERCENT = "may use `%` only to start a percent-escape: `%` and two hexadecimal digits"
NOT_TEXT = ("holds token expressions, which are replaced only in JSON, form-encoded, XML and "
            "text/plain bodies")
NOT_ENCODED = "is not valid in its declared character set"
REPEATED_KEY = "must not repeat a key in an object"
NOT_ALLOWED_FILTER = ("may use one filter among last4, card_bin, card_mask, reveal_last: <0-99>, "
                      "card_exp[: \"<format>\"] and json[: \"<$.path>\"], or json: \"<$.path>\" "
                      "then one of the others but json (json: \"$.number\" | last4)")
TOO_MANY_IN_FLIGHT = ("Too many of this tenant's proxy calls were waiting on their destinations "
                      "for this one to start in time; nothing was sent. Retry after the time in "
                      "Retry-After.")
FORWARDED = "forwarded"  # the audit event's reason of a call the destination answered

# Never forwarded: the caller's vault credentials, its cookies, hop-by-hop headers (RFC 9110
# §7.6.1), and what the vault sets itself for the destination (Host, the body's length and
# coding). Headers named in `Connection` are hop-by-hop too.
DROPPED_HEADERS = frozenset({
    "svc-api-key", "cookie", "cookie2", "host", "content-length", "content-encoding",
    "accept-encoding", "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "expect",
})
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
# A path segment's characters (RFC 3986 pchar); `%` only as the start of an escape.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SEGMENT = re.compile(r"^(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})+$")
_PCHAR = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:@%-]*$")  # a segment's characters, `%` any way
_JSON_TYPE = re.compile(r"^(?:application/(?:[\w.+-]+\+)?json|text/json)$")
_XML_TYPE = re.compile(r"^(?:application|text)/(?:[\w.+-]+\+)?xml$")
# Values go into a text/plain body as they are; no other text type (HTML, CSV…) takes them,
# since a value would need that format's escaping.
_TEXT_TYPE = "text/plain"
# Characters XML 1.0 allows in no document, escaped or not.
_NOT_IN_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
FORM = "application/x-www-form-urlencoded"
# Control characters other than the tab: no header value may carry them (CR and LF would end it).
_NOT_IN_HEADER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass(frozen=True)
class Call:
    """A proxy call as the HTTP layer read it: nothing of aiohttp."""

    method: str
    path: str  # the raw (percent-encoded) path after /proxy/{proxy_id}/
    query: str  # the raw query string, without `?`
    headers: list[tuple[str, str]]
    body: bytes
    media_type: str | None  # the Content-Type's media type, lower-case, no parameters
    charset: str | None


@dataclass(frozen=True)
class Forwarded:
    """The destination's answer, as the caller receives it."""

    status: int
    content_type: str | None
    body: bytes = field(repr=False)


@dataclass(slots=True)
class _TenantSlots:
    free: asyncio.Semaphore
    users: int = 0  # calls holding or waiting for a place


@dataclass(frozen=True, slots=True)
class _Expression:
    place: str
    token_id: str
    filters: str | None


# -- management -------------------------------------------------------------------------------

def check_tail(path: str) -> str:
    """The call's path under the destination, unchanged when it cannot climb out of it.

    Servers differ in what they make of a segment: Java ones drop its `;parameters` (`..;` is
    `..`), Windows ones its trailing dots and spaces (`.. ` is `..`), some fold look-alike
    characters to ASCII (U+FF0E is `.`). So each segment is judged by its part
    before `;`, after percent-decoding (as often as anyone downstream might) and again after
    compatibility folding (NFKC): empty, only dots and spaces, ending in a dot or a space, or
    holding a control character, a slash, a backslash or `%` is refused. One empty final segment
    (a trailing slash) is allowed. A path holding `{{`, as it is or percent-encoded, is refused
    with its own message (expressions are never replaced there), and so is one holding a
    character a URL path cannot hold unencoded, or a `%` that starts no escape."""
    if path == "":
        return path
    if _holds_expression(path):
        raise invalid("path", PATH_EXPRESSION)
    segments = path.split("/")
    if len(segments) > 1 and segments[-1] == "":
        segments.pop()  # `a/`: one trailing slash is the destination's business
    for segment in segments:
        if not segment or "\\" in segment or _CONTROL.search(segment):
            raise invalid("path", PATH_ESCAPES)  # refused encoded too: no encoding would help
        if not _SEGMENT.match(segment):
            raise invalid("path", PATH_CHARACTERS if not _PCHAR.match(segment) else PATH_PERCENT)
        decoded = segment
        for _ in range(3):  # %252e%252e: decoded as often as anyone downstream might
            decoded = unquote(decoded)
        if _CONTROL.search(decoded):
            raise invalid("path", PATH_ESCAPES)
        name = decoded.split(";", 1)[0]
        for form in (name, unicodedata.normalize("NFKC", name).replace("\u3002", ".")):
            if (not form.strip(". ") or form.endswith((".", " ")) or "/" in form
                    or "\\" in form or "%" in form or ";" in form):
                raise invalid("path", PATH_ESCAPES)
        if "/" in decoded or "\\" in decoded or "%" in decoded:
            raise invalid("path", PATH_ESCAPES)
    first = unquote(path.split("/", 1)[0])
    if ":" in first:  # `https:` then `//host`: an absolute URL, however the path is joined
        raise invalid("path", PATH_ESCAPES)
    return path


def _holds_expression(raw: str) -> bool:
    """Whether a raw (percent-encoded) path or query holds `{{`, as it is or percent-encoded
    (decoded as often as anyone downstream might)."""
    return "{{" in unquote(unquote(unquote(raw)))


def _check_query(query: str) -> str:
    """The call's raw query, unchanged when it holds no `{{`: expressions are not replaced in
    it, and one forwarded as literal text would reach the destination unreplaced. The error
    names the query, never its text."""
    if _holds_expression(query):
        raise invalid("query", NOT_REPLACED_HERE)
    return query


class ProxyService:
    def __init__(self, repo: ProxyRepository, tokens: TokenRepository, renderer: Renderer,
                 outbound: OutboundClient, *, max_in_flight: int = 64):
        self._repo = repo
        self._tokens = tokens
        self._renderer = renderer
        self._outbound = outbound
        self._max_in_flight = max_in_flight
        self._slots: dict[str, _TenantSlots] = {}  # only of tenants with calls under way

    @property
    def policy(self) -> AddressPolicy:
        return self._outbound.policy

    def _check_fields(self, fields: dict[str, Any]) -> dict[str, Any]:
        """`fields` (of a create or a patch) once the rules on their values hold."""
        out = dict(fields)
        if "destination_url" in fields:
            url = fields["destination_url"]
            message = self.policy.check_url(url)
            if message is None and urlsplit(url).query:
                message = HAS_QUERY
            if message is not None:
                raise invalid("destination_url", message)
        if "header_allowlist" in fields:
            names = [n.lower() for n in fields["header_allowlist"] or ()]
            if any(not _HEADER_NAME.match(n) for n in names):
                raise invalid("header_allowlist", NOT_A_HEADER)
            if any(n in DROPPED_HEADERS or n.startswith("svc-") for n in names):
                raise invalid("header_allowlist", DROPPED_HEADER)
            out["header_allowlist"] = list(dict.fromkeys(names))
        return out

    async def create(self, caller: Principal, fields: dict[str, Any]) -> Proxy:
        fields = self._check_fields(fields)
        return await self._repo.create(
            caller.tenant_id, str(uuid.uuid4()), name=fields["name"],
            destination_url=fields["destination_url"], description=fields.get("description"),
            header_allowlist=fields.get("header_allowlist") or [],
            created_by=caller.application_id)

    async def get(self, caller: Principal, proxy_id: str) -> Proxy:
        found = await self._repo.get(caller.tenant_id, parse_id(proxy_id, NO_SUCH_PROXY))
        if found is None:
            raise NotFound(NO_SUCH_PROXY)
        return found

    async def page(self, caller: Principal, size: int, cursor: object | None
                   ) -> tuple[list[Proxy], tuple[str, str] | None]:
        after = parse_position(cursor) if cursor is not None else None
        rows = await self._repo.page(caller.tenant_id, after, size + 1)
        page = rows[:size]
        return [proxy for proxy, _ in page], (page[-1][1] if len(rows) > size else None)

    async def update(self, caller: Principal, proxy_id: str, patch: dict[str, Any]) -> Proxy:
        proxy_id = parse_id(proxy_id, NO_SUCH_PROXY)
        changes = self._check_fields(patch)  # a null allowlist becomes []
        updated = await self._repo.update(caller.tenant_id, proxy_id, changes,
                                          modified_by=caller.application_id)
        if updated is None:
            raise NotFound(NO_SUCH_PROXY)
        return updated

    async def delete(self, caller: Principal, proxy_id: str) -> None:
        if not await self._repo.delete(caller.tenant_id, parse_id(proxy_id, NO_SUCH_PROXY)):
            raise NotFound(NO_SUCH_PROXY)

    # -- calls ----------------------------------------------------------------------------------

    @asynccontextmanager
    async def _tenant_slot(self, tenant_id: str) -> AsyncIterator[float]:
        """One of the tenant's `max_in_flight` places among the calls waiting on destinations
        (the outbound connections are every tenant's): waited for, within the call's time
        limit, which yields what is left of it. A call that gets none in time is a 429 and
        sends nothing."""
        slots = self._slots.get(tenant_id)
        if slots is None:
            slots = self._slots[tenant_id] = _TenantSlots(asyncio.Semaphore(self._max_in_flight))
        slots.users += 1
        began = time.monotonic()
        try:
            if not slots.free.locked():
                await slots.free.acquire()  # a place is free: taken at once, no timer armed
            else:
                try:
                    async with asyncio.timeout(CALL_TIME_LIMIT):
                        await slots.free.acquire()
                except TimeoutError:
                    note_reason("too_many_in_flight")
                    raise RateLimited(TOO_MANY_IN_FLIGHT) from None
            try:
                yield max(0.001, CALL_TIME_LIMIT - (time.monotonic() - began))
            finally:
                slots.free.release()
        finally:
            slots.users -= 1
            if not slots.users:
                del self._slots[tenant_id]

    async def call(self, caller: Principal, proxy_id: str, call: Call) -> Forwarded:
        """Send `call` to the proxy's destination with its token expressions replaced; the
        destination's answer. Nothing is sent when any expression fails (400)."""
        # The proxy and the tokens the call's text seems to name, in one read; the tokens are
        # used only if they cover every expression found once the body is parsed.
        candidates = _candidate_ids(call)
        proxy, prefetched = await self._repo.for_call(
            caller.tenant_id, parse_id(proxy_id, NO_SUCH_PROXY), ids=candidates or [],
            prefixes=caller.prefixes(TOKEN_USE))
        if proxy is None:
            raise NotFound(NO_SUCH_PROXY)
        tail = check_tail(call.path)
        query = _check_query(call.query)
        allowlist = set(proxy.header_allowlist)
        headers = _forwarded_headers(call.headers)
        body_kind, found, errors = _body_expressions(call)
        header_places: list[tuple[int, list[tuple[re.Match, str | None]]]] = []
        for index, (name, value) in enumerate(headers):
            if name.lower() in allowlist:
                matches = _scan(value, f"headers.{name}", found, errors)
                if matches:
                    header_places.append((index, matches))
            elif "{{" in value:  # forwarded unreplaced otherwise: refused, its value unquoted
                _error(errors, f"headers.{name}", NOT_REPLACED_HERE)
        if len(found) > MAX_EXPRESSIONS:
            raise Invalid(errors={"body": [TOO_MANY]})
        for expression in found:  # judged by the expression alone: before any token is read
            if expression.filters is not None and _allowed_filter(expression.filters) is None:
                _error(errors, expression.place, NOT_ALLOWED_FILTER)
        if errors:
            raise Invalid("The request holds invalid token expressions.", errors=errors)
        values = await self._values(caller, found, candidates, prefetched) if found else {}
        rendered = await self._rendered(found, values)
        body = call.body
        if found:
            body = _substitute_body(call, body_kind, rendered)
            unsendable: dict[str, list[str]] = {}
            for index, matches in header_places:
                name, value = headers[index]
                value = _interpolate(value, matches, rendered)
                if _NOT_IN_HEADER.search(value):  # would split or end the header: refused
                    _error(unsendable, f"headers.{name}", UNRENDERED)
                headers[index] = (name, value)
            if unsendable:
                raise Invalid(RENDER_FAILED, errors=unsendable)
        if len(body) > MAX_BYTES:  # the caller's request, not the destination, is too large
            note_reason("request_too_large")
            raise TooLarge(f"The request's body is larger than {MAX_BYTES} bytes once its token "
                           "expressions are replaced; nothing was sent.")
        url = proxy.destination_url.rstrip("/") + "/" + tail if tail else proxy.destination_url
        if query:
            url += "?" + query
        async with self._tenant_slot(caller.tenant_id) as time_left:
            try:
                answer = await self._outbound.request(
                    call.method, url, headers=headers, body=body or None,
                    time_limit=time_left, max_request_bytes=MAX_BYTES,
                    max_answer_bytes=MAX_BYTES)
            except OutboundError as exc:
                note_reason(f"destination_{exc.reason}")
                raise DestinationFailed(_failure(proxy, exc)) from None
        note_reason(FORWARDED)
        return Forwarded(answer.status, answer.content_type, answer.body)

    async def _values(self, caller: Principal, found: list[_Expression],
                      candidates: list[str] | None,
                      prefetched: list[StoredToken]) -> dict[str, Any]:
        """The revealed data of each token named, by id; one 400 naming every expression whose
        token the caller may not use (unknown, foreign, expired and unusable alike). The
        tokens read with the proxy serve when they were asked for every id found."""
        ids = list(dict.fromkeys(e.token_id for e in found))
        note_tokens(ids)  # every id asked for is in the event, usable or not
        if candidates is not None and set(ids) <= set(candidates):
            wanted = set(ids)
            nodes = [n for n in prefetched if n.id in wanted]
        else:
            nodes = await self._tokens.page(
                tenant_id=caller.tenant_id, prefixes=caller.prefixes(TOKEN_USE), after="",
                limit=len(ids), where=TokenFilter(ids=tuple(ids)))
        usable = {n.id: n for n in nodes if caller.decide(n.containers, TOKEN_USE).allowed}
        missing: dict[str, list[str]] = {}
        for e in found:
            if e.token_id not in usable and e.place not in missing:
                add_error(missing, e.place, [UNUSABLE])
        if missing:
            raise Invalid("Some token expressions name no token the application may use.",
                          errors=missing)
        return {token_id: decrypt_field(caller.keys, node, "data")
                for token_id, node in usable.items()}

    async def _rendered(self, found: list[_Expression],
                        values: dict[str, Any]) -> dict[tuple[str, str | None], Any]:
        """Each (token id, filters) pair's value: the data itself without filters, else the
        filters' text output, rendered off the event loop within the request's budget."""
        errors: dict[str, list[str]] = {}

        def work() -> dict[tuple[str, str | None], Any]:
            out: dict[tuple[str, str | None], Any] = {}
            for e in found:
                key = (e.token_id, e.filters)
                if key in out:
                    continue
                value = values[e.token_id]
                if e.filters is not None:
                    apply = _allowed_filter(e.filters)
                    assert apply is not None  # checked before any token was read
                    try:
                        value = as_text(apply(value))
                    except ExpressionError:  # unreachable on data decoded from JSON
                        _error(errors, e.place, UNRENDERED)
                        continue
                out[key] = value
            return out

        if any(e.filters is not None for e in found):
            out = await self._renderer.run(work)
        else:
            out = work()
        if errors:
            raise Invalid(RENDER_FAILED, errors=errors)
        return out


def _failure(proxy: Route, exc: OutboundError) -> str:
    what = {"refused": "its destination is an address the vault may not connect to",
            "timeout": "its destination did not answer in time",
            "answer_too_large": f"its destination's answer is larger than {MAX_BYTES} bytes",
            "request_too_large": f"the request is larger than {MAX_BYTES} bytes",
            "not_sendable": "the request could not be written"}.get(
        exc.reason, "its destination could not be reached")
    return f"Proxy {proxy.id}: {what}."


# The caller writes the filters, and a render that fails is a 400 where a success is forwarded:
# a filter that could fail, or grow its input, depending on the data would tell the caller one
# fact about the data per call. So an expression holds one filter from this list of filters
# that never fail on data decoded from JSON and whose output length does not depend on the data
# beyond its own length (no Liquid: no output or time budget to exceed either), or two: a
# selection `json: "<$.path>"` then one of the others but `json`. A selection never fails on
# JSON data (a missing field is nothing) and is part of the data, its text no longer than the
# data's; the filter after it then works on that part as it would on the whole.
_NO_ARGUMENT = re.compile(r"^\s*(last4|card_bin|card_mask|card_exp|json)\s*$")
_REVEAL_LAST = re.compile(r"^\s*reveal_last\s*:\s*([0-9]{1,2})\s*$")
_QUOTED = r"(?:\"([^\"\\\\]{0,64})\"|'([^'\\\\]{0,64})')"
_TEXT_ARGUMENT = re.compile(rf"^\s*(card_exp|json)\s*:\s*{_QUOTED}\s*$")
_SELECTION_THEN = re.compile(rf"^\s*json\s*:\s*{_QUOTED}\s*\|(.*)$", re.DOTALL)
_PLAIN = {"last4": last4, "card_bin": card_bin, "card_mask": card_mask, "card_exp": card_exp,
          "json": json_filter}


def _allowed_filter(filters: str) -> Any:
    """The function an expression's filter text names, when it is one allowed filter with
    valid literal arguments, or a `json: "<$.path>"` selection then one allowed filter other
    than `json`; else None. Depends on the text only, never on data."""
    if (match := _SELECTION_THEN.match(filters)) is not None:
        select = _selection(match[1] if match[1] is not None else match[2])
        then = _one_filter(match[3])
        if select is None or then is None or then[0] == "json":
            return None
        apply = then[1]
        return lambda value: apply(select(value))
    one = _one_filter(filters)
    return one[1] if one is not None else None


def _one_filter(text: str) -> tuple[str, Callable[[Any], Any]] | None:
    """The name and function of one allowed filter with valid literal arguments; else None."""
    if (match := _NO_ARGUMENT.match(text)) is not None:
        return match[1], _PLAIN[match[1]]
    if (match := _REVEAL_LAST.match(text)) is not None:
        count = int(match[1])
        return "reveal_last", lambda value: reveal_last(value, count)
    if (match := _TEXT_ARGUMENT.match(text)) is not None:
        name, argument = match[1], match[2] if match[2] is not None else match[3]
        if name == "json":
            select = _selection(argument)
            return None if select is None else ("json", select)
        return name, lambda value: card_exp(value, argument)
    return None


def _selection(path: str) -> Callable[[Any], Any] | None:
    """`json: "<path>"` as a function; None when the path is invalid (it would fail on any
    data: refused before any is read)."""
    try:
        json_filter({}, path)
    except ExpressionError:
        return None
    return lambda value: json_filter(value, path)


def _text(value: Any) -> str:
    """A value put into text: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


# Where an expression would start in a call's raw text: `{{`, spaces, an id. Only a guess at
# the ids the parsed body and the allowed headers hold (a JSON escape or a form's percent
# encoding hides one), used to read their tokens with the proxy.
_CANDIDATE = re.compile(rb"\{\{\s*([^\s|{}\\\"]{1,200})")


def _candidate_ids(call: Call) -> list[str] | None:
    """The ids the call's body and headers seem to name, once each; None when there are more
    than a call may use (the call is refused or read the slow way)."""
    seen: dict[str, None] = {}
    texts = [call.body] if b"{{" in call.body else []
    texts += [v.encode("utf-8", "replace") for _, v in call.headers if "{{" in v]
    for text in texts:
        for match in _CANDIDATE.finditer(text):
            seen[match[1].decode("utf-8", "replace")] = None
            if len(seen) > MAX_EXPRESSIONS:
                return None
    return list(seen)


def _forwarded_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    connection = {name.strip().lower() for n, v in headers if n.lower() == "connection"
                  for name in v.split(",")}
    return [(n, v) for n, v in headers
            if (low := n.lower()) not in DROPPED_HEADERS and low not in connection
            and not low.startswith("svc-")]


def _scan(text: str, place: str, found: list[_Expression],
          errors: dict[str, list[str]]) -> list[tuple[re.Match, str | None]]:
    """The expressions in `text` (added to `found`); a `{{` that starts none is an error."""
    matches = []
    position = 0
    for match in EXPRESSION.finditer(text):
        filters = match["filters"]
        if "{{" in text[position:match.start()]:
            _error(errors, place, NOT_AN_EXPRESSION)
            return []
        if filters is not None and not filters.strip():
            _error(errors, place, BAD_FILTERS)
            return []
        found.append(_Expression(place, match["id"], filters))
        matches.append((match, filters))
        position = match.end()
    if "{{" in text[position:]:
        _error(errors, place, NOT_AN_EXPRESSION)
        return []
    return matches


def _error(errors: dict[str, list[str]], place: str, message: str) -> None:
    """One message more for `place` (the list stays bounded: errors.add_error)."""
    if place in errors:
        errors[place].append(message)
    else:
        add_error(errors, place, [message])


def _interpolate(text: str, matches: list[tuple[re.Match, str | None]],
                 rendered: dict[tuple[str, str | None], Any],
                 encode: Callable[[str], str] = str) -> str:
    out, position = [], 0
    for match, filters in matches:
        out.append(text[position:match.start()])
        out.append(encode(_text(rendered[(match["id"], filters)])))
        position = match.end()
    out.append(text[position:])
    return "".join(out)


def _body_expressions(call: Call) -> tuple[str, list[_Expression], dict[str, list[str]]]:
    """The body's kind (json, form, text, other or empty) and its expressions."""
    found: list[_Expression] = []
    errors: dict[str, list[str]] = {}
    if not call.body:
        return "empty", found, errors
    media = call.media_type or ""
    if _JSON_TYPE.match(media):
        try:
            payload = orjson.loads(call.body)
        except orjson.JSONDecodeError:
            raise invalid("body", "is not valid JSON") from None
        _walk_json(payload, (), found, errors)  # also refuses more than 64 levels
        if found or b"{{" in call.body:  # else nothing in it is replaced: it goes as sent
            _refuse_repeated_keys(call.body)
        return "json", found, errors
    if media == FORM or media == _TEXT_TYPE or _XML_TYPE.match(media):
        text = _decode(call)
        if media == FORM:
            for name, value in _form_pairs(text, call):
                _scan(value, f"body.{name}", found, errors)
            return "form", found, errors
        _scan(text, "body", found, errors)
        return "text" if media == _TEXT_TYPE else "xml", found, errors
    if b"{{" in call.body:
        raise invalid("body", NOT_TEXT)
    return "other", found, errors


def _decode(call: Call) -> str:
    try:
        return call.body.decode(call.charset or "utf-8")
    except (LookupError, UnicodeDecodeError):
        raise invalid("body", NOT_ENCODED) from None


class _RepeatedKey(Exception):
    pass


def _no_repeat(pairs: list[tuple[str, Any]]) -> None:
    if len({key for key, _ in pairs}) != len(pairs):
        raise _RepeatedKey
    # None: nothing of the document is kept (only its keys are judged)


def _refuse_repeated_keys(raw: bytes) -> None:
    """A 400 naming the body when one of its objects repeats a key. The expressions are found
    in the parsed document, which keeps one of the repeated values, and replaced in the raw
    bytes, which keep both: a value the parse dropped would be forwarded with its expressions
    unchecked and unreplaced (and which one a destination reads is its own parser's choice).
    `raw` is valid JSON at most 65 levels deep (parsed and walked before)."""
    try:  # numbers are not converted: only the keys matter
        json.loads(raw, object_pairs_hook=_no_repeat, parse_int=len, parse_float=len)
    except _RepeatedKey:
        raise invalid("body", REPEATED_KEY) from None
    except ValueError:  # never seen on what orjson parsed: refused rather than forwarded
        raise invalid("body", "is not valid JSON") from None


def _walk_json(value: Any, path: tuple, found: list[_Expression],
               errors: dict[str, list[str]]) -> None:
    stack = [(path, value)]
    while stack:
        path, value = stack.pop()
        if len(path) > 64:
            raise invalid("body", "must be nested at most 64 levels deep")
        if isinstance(value, str):
            if "{{" in value:
                _scan(value, ".".join(str(p) for p in path) or "body", found, errors)
        elif isinstance(value, dict):  # pushed in reverse: popped in document order
            stack.extend(reversed([((*path, k), v) for k, v in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([((*path, i), v) for i, v in enumerate(value)]))


def _substitute_body(call: Call, kind: str,
                     rendered: dict[tuple[str, str | None], Any]) -> bytes:
    def replace_text(text: str, encode: Callable[[str], str] = str) -> str:
        matches = [(m, m["filters"]) for m in EXPRESSION.finditer(text)]
        return _interpolate(text, matches, rendered, encode) if matches else text

    if kind == "json":
        def rebuild(value: str) -> Any:
            whole = EXPRESSION.fullmatch(value.strip())
            if whole is not None:  # the value itself, of any JSON type (as detokenize)
                return rendered[(whole["id"], whole["filters"])]
            return replace_text(value)

        return _substitute_json(call.body, rebuild)
    text = _decode(call)
    charset = call.charset or "utf-8"
    try:
        if kind == "form":
            pairs = [(name, replace_text(value)) for name, value in _form_pairs(text, call)]
            return urlencode(pairs, encoding=charset).encode(charset)
        if kind == "xml":
            # a character the charset lacks is a character reference, as XML allows anywhere
            # values go (text and attribute values)
            return replace_text(text, _xml_escaped).encode(charset, "xmlcharrefreplace")
        return replace_text(text).encode(charset)
    except UnicodeEncodeError:  # a value the body's character set cannot hold
        raise Invalid(RENDER_FAILED, errors={"body": [UNRENDERED]}) from None


# A JSON string literal. In a valid document (the body was parsed before this runs) a `"`
# outside a string always opens one, so these matches are exactly the document's strings.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_SPACE = b" \t\r\n"


def _substitute_json(raw: bytes, rebuild: Callable[[str], Any]) -> bytes:
    """`raw` with each string value that holds an expression replaced by the JSON of
    `rebuild(value)`; every other byte as the caller sent it (numbers keep their spelling,
    `12.50` stays `12.50`; spacing and key order stay). Object keys are never replaced."""
    out: list[bytes] = []
    position = 0
    for match in _JSON_STRING.finditer(raw):
        literal = match[0]
        if b"{" not in literal and b"\\u" not in literal:
            continue  # no `{{`, spelled plainly or escaped
        value = orjson.loads(literal)
        if "{{" not in value:
            continue
        after = match.end()
        while after < len(raw) and raw[after] in _JSON_SPACE:
            after += 1
        if after < len(raw) and raw[after] == ord(":"):
            continue  # a key
        out += [raw[position:match.start()], orjson.dumps(rebuild(value))]
        position = match.end()
    return b"".join(out) + raw[position:] if out else raw


def _form_pairs(text: str, call: Call) -> list[tuple[str, str]]:
    """A form body's pairs, its percent-escapes read in the body's character set."""
    try:
        return parse_qsl(text, keep_blank_values=True, encoding=call.charset or "utf-8",
                         errors="strict")
    except UnicodeDecodeError:
        raise invalid("body", NOT_ENCODED) from None


def _xml_escaped(value: str) -> str:
    """`value` as XML character data or an attribute value (either quote)."""
    if _NOT_IN_XML.search(value):
        raise Invalid(RENDER_FAILED, errors={"body": [UNRENDERED]})
    return xml_escape(value, {'"': "&quot;", "'": "&apos;"})

