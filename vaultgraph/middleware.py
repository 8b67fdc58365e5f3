"""Request middlewares, outermost first: trace id → errors (RFC 7807) → authentication."""

from __future__ import annotations

import logging
import re
import time
import uuid

from aiohttp import web
from marshmallow import ValidationError

from . import problems
from .auth.authenticate import HEADER
from .auth.permissions import AUTHENTICATED, PUBLIC, declared
from .http import problem_response
from .logs import trace_id_var
from .typedefs import PRINCIPAL, TRACE_ID, authenticator_key

log = logging.getLogger("vaultgraph.http")
TRACE_HEADER = "SVC-TRACE-ID"
_TRACE_SHAPE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@web.middleware
async def trace(request: web.Request, handler) -> web.StreamResponse:
    incoming = request.headers.get(TRACE_HEADER, "")
    trace_id = incoming if _TRACE_SHAPE.match(incoming) else uuid.uuid4().hex
    request[TRACE_ID] = trace_id
    token = trace_id_var.set(trace_id)
    started = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        response.headers[TRACE_HEADER] = trace_id
        return response
    finally:
        log.info("request", extra={
            "method": request.method, "route": _route_name(request), "status": status,
            "ms": round((time.perf_counter() - started) * 1000, 2)})
        trace_id_var.reset(token)


def _route_name(request: web.Request) -> str | None:
    # The route template, never the concrete path: paths carry token ids.
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else None


_HTTP_PROBLEMS = {
    400: problems.BadRequest, 404: problems.NotFound, 405: problems.MethodNotAllowed,
    413: problems.PayloadTooLarge, 415: problems.UnsupportedMediaType,
}


@web.middleware
async def errors(request: web.Request, handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except problems.Problem as exc:
        return problem_response(exc)
    except ValidationError as exc:
        return problem_response(problems.BadRequest(
            "The request is invalid.", errors=_flatten(exc.normalized_messages())))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        cls = _HTTP_PROBLEMS.get(exc.status)
        problem = cls() if cls else problems.Problem()
        if cls is None:
            problem.status = exc.status
            problem.title = exc.reason
        if exc.status == 413:
            problem.detail = "The request body is too large."
        if exc.status == 405 and "Allow" in exc.headers:
            problem.headers["Allow"] = exc.headers["Allow"]
        return problem_response(problem)
    except Exception:
        log.exception("unhandled error")
        return problem_response(problems.InternalError("An internal error occurred."))


def _flatten(messages, prefix: str = "") -> dict[str, list[str]]:
    """marshmallow's nested messages → {"a.b": [..]}; values are messages, never input."""
    out: dict[str, list[str]] = {}
    if isinstance(messages, dict):
        for key, value in messages.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                out.update(_flatten(value, name))
            else:
                out[name] = [str(m) for m in (value if isinstance(value, list) else [value])]
    else:
        out[prefix or "body"] = [str(m) for m in messages]
    return out


@web.middleware
async def authenticate(request: web.Request, handler) -> web.StreamResponse:
    if request.match_info.http_exception is not None:
        return await handler(request)  # unknown route or method: the error middleware answers
    needed = declared(request.match_info.handler)
    if needed == PUBLIC:
        return await handler(request)
    principal = await request.app[authenticator_key].authenticate(request.headers.get(HEADER))
    if needed != AUTHENTICATED and (
            not needed or not all(principal.granted_anywhere(p) for p in needed)):
        # No declaration means no access: routes are protected by default.
        raise problems.Forbidden("The application lacks the permission for this operation.")
    request[PRINCIPAL] = principal
    response = await handler(request)
    # Answers to a key may hold plaintext or a new API key: no browser or proxy may keep them.
    response.headers.setdefault("Cache-Control", "no-store")
    return response
