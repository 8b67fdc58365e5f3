"""Request middlewares: the trailing slash, the trace id, the audit event, errors (RFC 9457),
authentication and authorisation. Their order, with those of the other api modules, is
`app.MIDDLEWARES` (the one list; docs/architecture.md "The middleware chain" describes it).

The error middleware is the one place where domain errors (`vaultgraph/errors.py`) become
problem+json answers."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from datetime import UTC, datetime

from aiohttp import web
from marshmallow import ValidationError
from multidict import istr

from .. import metrics
from ..audit import context as audit_context
from ..audit.event import MAX_USER_AGENT, bounded_text
from ..auth.apikeys import HEADER
from ..auth.permissions import AUTHENTICATED, PUBLIC, declared
from ..deadline import request_deadline
from ..errors import (
    MAX_LISTED_ERRORS,
    TimedOut,
    Unauthenticated,
    VaultError,
    add_error,
    field_name,
)
from ..logging_setup import trace_id_var
from . import metrics as api_metrics
from . import problems, ratelimit
from .metrics import CLIENT_CLOSED
from .request_io import problem_response
from .typedefs import (
    PRINCIPAL,
    SERVER,
    SERVER_NAME,
    SLASH_STRIPPED,
    TRACE_ID,
    services_key,
    settings_key,
)

log = logging.getLogger("vaultgraph.http")
_KEY_HEADER = istr(HEADER)  # looked up as it is stored: no case folding per request
TRACE_HEADER = "SVC-TRACE-ID"
TRACEPARENT = "traceparent"
# W3C Trace Context: version-traceid-parentid-flags, lower-case hex; all-zero ids are invalid.
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_W3C_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


def well_formed_trace_id(value: str) -> bool:
    """A W3C trace id: 32 lower-case hex digits, not all zero. The only form a caller's trace
    id is taken in (in `SVC-TRACE-ID` as in `traceparent`), so the audit trail's correlation
    field never holds text of the caller's choosing."""
    return _W3C_TRACE_ID.fullmatch(value) is not None and value != "0" * 32


def _from_traceparent(value: str) -> tuple[str, str] | None:
    """(trace id, flags) of a valid `traceparent`, else None (a malformed one is ignored)."""
    match = _TRACEPARENT.match(value.strip())
    if match is None:
        return None
    version, trace_id, parent_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or not well_formed_trace_id(trace_id) \
            or set(parent_id) == {"0"}:
        return None
    return trace_id, flags


def new_uuid4_hex() -> str:
    """`uuid.uuid4().hex` without building a `uuid.UUID` (half the cost; two a request): 16
    random bytes with the version (4) and RFC 4122 variant bits set."""
    b = bytearray(os.urandom(16))
    b[6] = b[6] & 0x0F | 0x40
    b[8] = b[8] & 0x3F | 0x80
    return b.hex()


def new_uuid4_text() -> str:
    """`str(uuid.uuid4())`: 8-4-4-4-12 lower-case hex digits."""
    h = new_uuid4_hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@web.middleware
async def observe(request: web.Request, handler) -> web.StreamResponse:
    """What every request gets, outermost, in one layer:

    - its trailing slash: `/tokens/` is `/tokens`: a path that matches no route only because
      of its trailing slash is served by the route without it, for every method and with no
      redirect (clients such as the Basis Theory SDK add the slash; a redirect would turn their
      POST into a GET). Only the path changes: the query string (filters, `size`, `start`) is
      kept as it came, and the path stays as it was encoded. The whole chain then runs on that
      route (and counts, traces and logs the request once);
    - its metrics: counted by route template, method and status and timed (the concrete path
      is never a label: paths carry token ids);
    - its trace id: a valid W3C `traceparent`'s, else an `SVC-TRACE-ID` that is a well-formed
      W3C trace id (`well_formed_trace_id`: anything else is ignored), else a new one. It is
      answered in `SVC-TRACE-ID` and `traceparent` (a new span id of ours, the caller's
      flags), written in every log line and audit event and in problem bodies;
    - its log line (method, route template, status, milliseconds)."""
    match = request.match_info
    failed = match.http_exception
    if failed is not None and failed.status == 404:
        path = request.rel_url.raw_path
        if len(path) >= 2 and path.endswith("/"):
            stripped = request.clone(rel_url=request.rel_url.with_path(
                path.rstrip("/") or "/", encoded=True, keep_query=True))
            stripped[SLASH_STRIPPED] = True
            resolved = await request.app.router.resolve(stripped)
            if resolved.http_exception is None or resolved.http_exception.status != 404:
                return await request.app._handle(stripped)  # the whole chain, on the route
    resource = match.route.resource if failed is None else None
    template = resource.canonical if resource is not None else None
    method = request.method
    started = time.perf_counter()
    headers = request.headers
    parent = _from_traceparent(headers.get(TRACEPARENT, ""))
    if parent is not None:
        trace_id, flags = parent
    else:
        # A new one is a UUID4's hex: random, and never all zero (its version digit is 4).
        incoming = headers.get(TRACE_HEADER, "")
        trace_id = incoming if well_formed_trace_id(incoming) else new_uuid4_hex()
        flags = "00"
    request[TRACE_ID] = trace_id
    token = trace_id_var.set(trace_id)
    status = 500  # what the log line says of an exception
    counted = 500
    metrics.IN_PROGRESS.inc()
    try:
        response = await handler(request)
        status = counted = response.status
        response.headers[TRACE_HEADER] = trace_id
        response.headers[TRACEPARENT] = f"00-{trace_id}-{os.urandom(8).hex()}-{flags}"
        response.headers[SERVER] = SERVER_NAME
        if draining(request):
            # Shutting down: this connection's next request must go to another process.
            response.force_close()
        return response
    except web.HTTPException as exc:  # redirects; every error is a problem answer by now
        counted = exc.status
        exc.headers[SERVER] = SERVER_NAME
        raise
    except asyncio.CancelledError:
        counted = CLIENT_CLOSED  # the client went away first: not the service's failure
        raise
    finally:
        elapsed = time.perf_counter() - started
        metrics.IN_PROGRESS.dec()
        api_metrics.count_request(
            template if template is not None else metrics.UNMATCHED_ROUTE,
            method if method in metrics.METHODS else metrics.OTHER_METHOD, counted, elapsed)
        # The route template, never the concrete path: paths carry token ids.
        log.info("request", extra={"method": method, "route": template, "status": status,
                                   "ms": round(elapsed * 1000, 2)})
        trace_id_var.reset(token)


def draining(request: web.Request) -> bool:
    services = request.app.get(services_key)
    return services is not None and services.readiness.draining


STARTING_RETRY_AFTER = 5  # seconds: start-up plans for about a minute on a fresh Neo4j
STARTING = ("The service is still starting and could not answer in time; GET /ready answers "
            "200 once it is ready. Try again then.")


def _problem(request: web.Request, exc: VaultError) -> problems.Problem:
    """The problem answering `exc`. While the service is still starting (before `/ready`
    turns 200), a protected route's request that ran out of time (`TimedOut`: a statement, or
    its audit event) most likely met Neo4j planning on a cold server: the answer says the
    service is starting, and when to try again, rather than blaming the database or the trail.
    Any other failure (Neo4j down, a refused write) keeps its own detail, and `/ready` its own
    words."""
    problem = problems.from_error(exc)
    if isinstance(exc, TimedOut) and declared(request.match_info.handler) != PUBLIC:
        services = request.app.get(services_key)
        if services is not None and not services.readiness.started:
            problem.detail = STARTING
            problem.headers["Retry-After"] = str(STARTING_RETRY_AFTER)
    return problem


_HTTP_PROBLEMS = {
    400: problems.BadRequest, 404: problems.NotFound, 405: problems.MethodNotAllowed,
    413: problems.PayloadTooLarge, 415: problems.UnsupportedMediaType,
}


# Path parameters that name tokens: the audit event records them whatever the outcome.
_TOKEN_PARAMS = ("id", "parent_id", "child_id")


@web.middleware
async def audit(request: web.Request, handler) -> web.StreamResponse:
    """Every request that reaches a protected route leaves an event (docs/audit.md), written
    before the response leaves: a write's event is already in the write's own transaction and
    is linked into the chain without waiting; any other is group-committed first. An event
    that cannot be written turns the answer into a 503 with no data (fail closed)."""
    match = request.match_info
    if match.http_exception is not None:
        return await handler(request)
    needed = declared(match.handler)
    if needed == PUBLIC:
        return await handler(request)
    resource = match.route.resource
    route = f"{request.method} {resource.canonical}" if resource is not None else None
    note = audit_context.AuditNote(
        id=new_uuid4_text(), at=datetime.now(UTC),
        operation=",".join(needed) if isinstance(needed, tuple) else needed, route=route,
        trace_id=request.get(TRACE_ID), client_ip=request.remote,
        user_agent=bounded_text(request.headers.get("User-Agent"), MAX_USER_AGENT))
    if route is not None and " /tokens" in route:
        note.name_tokens(match[k] for k in _TOKEN_PARAMS if k in match)
    writer = request.app[services_key].audit_writer
    note.placer = writer
    with writer.arriving() as arrival:  # the writer's batches wait for this request's event
        token = audit_context.current.set(note)
        try:
            # One deadline for all the request's database work (authentication, idempotency
            # bookkeeping, the change), not one per statement.
            with request_deadline(request.app[settings_key].request_timeout) as budget:
                response = await handler(request)
        except asyncio.CancelledError:
            # The server stopping with the request unanswered: the event is still handed over,
            # without waiting, whatever its write did (a write event's place is written again;
            # the batch waits for a write still running there).
            audit_context.note_reason("cancelled")
            writer.record_unanswered(note.event(CLIENT_CLOSED, request.get(PRINCIPAL)), arrival,
                                     placed=note.placed, stored=note.stored)
            raise
        finally:
            audit_context.current.reset(token)
        event = note.event(response.status, request.get(PRINCIPAL))
        try:
            if note.placed is not None:  # stored complete at its place by the write
                if note.persisted and event == note.expected:
                    writer.pin(note.placed, arrival)  # as it stands: nothing more to write
                else:
                    await writer.record_placed(writer.replaced(note.placed, event), arrival,
                                               within=budget.remaining,
                                               wait=not note.persisted)
            elif note.persisted:
                writer.record_later(event, arrival, stored=note.stored)
            else:  # within the request's budget too: its database time in all
                await writer.record(event, arrival, stored=note.stored,
                                    within=budget.remaining)
        except VaultError as exc:
            return problem_response(_problem(request, exc))
    return response


@web.middleware
async def errors(request: web.Request, handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except problems.Problem as exc:
        audit_context.note_reason(exc.slug)
        return problem_response(exc)
    except VaultError as exc:
        problem = _problem(request, exc)
        audit_context.note_reason(problem.slug)
        return problem_response(problem)
    except ValidationError as exc:
        audit_context.note_reason("validation")
        return problem_response(problems.BadRequest(
            "The request is invalid.", errors=_flatten(exc.normalized_messages())))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        cls = _HTTP_PROBLEMS.get(exc.status)
        problem = cls() if cls else problems.Problem()
        audit_context.note_reason(problem.slug)
        if cls is None:
            problem.status = exc.status
            problem.title = exc.reason
        if exc.status == 413:
            problem.detail = "The request body is too large."
        if exc.status == 405 and "Allow" in exc.headers:
            problem.headers["Allow"] = exc.headers["Allow"]
        return problem_response(problem)
    except ConnectionError:
        # The client went away mid-request (a reset, a body cut short): not an error of ours,
        # and no one is left to read the answer (the audit event records it as refused).
        log.info("client disconnected")
        audit_context.note_reason("disconnected")
        problem = problems.BadRequest("The client closed the connection.")
        problem.close = True
        return problem_response(problem)
    except Exception:
        log.exception("unhandled error")
        return problem_response(problems.InternalError("An internal error occurred."))


def _flatten(messages, prefix: str = "", out: dict[str, list[str]] | None = None
             ) -> dict[str, list[str]]:
    """marshmallow's nested messages → {"a.b": [..]}; values are messages, never input. Names
    can be input (unknown fields, metadata keys): at most MAX_LISTED_ERRORS of them, each cut
    to MAX_FIELD_NAME characters (`errors.add_error`)."""
    out = {} if out is None else out
    if isinstance(messages, dict):
        for key, value in messages.items():
            if len(out) >= MAX_LISTED_ERRORS:
                break
            name = field_name(f"{prefix}.{key}" if prefix else str(key))
            if isinstance(value, dict):
                _flatten(value, name, out)
            else:
                add_error(out, name,
                          [str(m) for m in (value if isinstance(value, list) else [value])])
    else:
        add_error(out, prefix or "body", [str(m) for m in messages])
    return out


@web.middleware
async def access(request: web.Request, handler) -> web.StreamResponse:
    """Who is asking, whether they may, and what it costs, in one layer (each step before the
    next, as listed):

    1. the failed-authentication throttle (api/ratelimit.py): an address over its failure
       budget gets 429 before its key is looked up; the request holds one unit of that budget
       until its key is known good;
    2. authentication: the `SVC-API-KEY`, sent once, becomes the request's principal (401
       otherwise);
    3. the rate limit (api/ratelimit.py `charge`): one unit of the application's bucket, spent
       before anything is decided about the request, so a refusal is paid for like an answer;
    4. authorisation: the route's declared permission (403 without it; a route that declares
       none is refused: routes are protected by default).

    Answers to a key may hold plaintext or a new API key: no browser or proxy may keep them
    (`Cache-Control: no-store`). Public routes, and requests that match no route (the error
    middleware answers them), pass through."""
    match = request.match_info
    if match.http_exception is not None:
        return await handler(request)
    needed = declared(match.handler)
    if needed == PUBLIC:
        return await handler(request)
    services = request.app[services_key]
    # The key sent once; sent twice or more it is no key (which one would be meant?): the 401 a
    # missing key gets, whatever the keys are.
    keys = request.headers.getall(_KEY_HEADER, ())
    key = keys[0] if len(keys) == 1 else ""
    failures = services.rate_limits.auth_failures
    reservation = None
    if failures.enabled:
        verdict, reservation = failures.reserve(request.remote or "", key)
        if reservation is None:
            ratelimit.refuse_failed_auth(verdict)
    try:
        principal = await services.authenticator.authenticate(key)
        if reservation is not None:
            # The key is good: the failure budget it reserved goes back at once (not when the
            # request ends, so requests in flight hold none of it).
            reservation.authenticated()
        request[PRINCIPAL] = principal
        note = audit_context.current.get()
        if note is not None:
            note.principal = principal
        ratelimit.charge(request)
        if needed != AUTHENTICATED and (
                not needed or not all(principal.granted_anywhere(p) for p in needed)):
            # No declaration means no access: routes are protected by default.
            raise problems.Forbidden(
                "The application lacks the permission for this operation.")
        response = await handler(request)
    except Unauthenticated:
        if reservation is not None:
            reservation.failed()
        raise
    finally:
        if reservation is not None:
            reservation.release()
    response.headers.setdefault("Cache-Control", "no-store")
    return response
