"""A request's way in and out, shared by every handler: its body (bounded in time, as JSON of
its declared type), its principal, and a problem+json answer."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from ..logging_setup import trace_id_var
from . import problems, wide_integers
from .endpoints import PROBLEM_JSON, compile_dumper
from .typedefs import PRINCIPAL, settings_key

_PROBLEM = compile_dumper(problems.ProblemSchema)


def problem_body(problem: problems.Problem, trace_id: str | None = None) -> bytes:
    """The problem's JSON, with the request's trace id (`trace_id`) when there is one."""
    body = problem.body()
    trace_id = trace_id or trace_id_var.get()
    if trace_id:
        body["trace_id"] = trace_id
    return orjson.dumps(_PROBLEM(body))


def problem_response(problem: problems.Problem) -> web.Response:
    response = web.Response(body=problem_body(problem), status=problem.status,
                            headers=problem.headers, content_type=PROBLEM_JSON)
    if problem.close:
        response.force_close()
    return response


def _cut_short(problem: problems.Problem) -> problems.Problem:
    """The body was not read whole: the connection closes after the answer."""
    problem.close = True
    return problem


async def read_body(request: web.Request) -> bytes:
    """The body's bytes. A body must arrive in time (a client promising bytes it never sends
    holds a connection otherwise): 408 past `VAULTGRAPH_BODY_READ_TIMEOUT`; one the parser
    refuses (a malformed chunk) or cannot decode (a `Content-Encoding` the bytes are not in) is
    a 400 that quotes none of it. Either closes the connection."""
    try:
        if request.content.is_eof():
            # The parser has the whole body (a small one comes with its headers): reading it
            # cannot wait, so no timer is armed for it.
            return await request.read()
        async with asyncio.timeout(request.app[settings_key].body_read_timeout or None):
            return await request.read()
    except TimeoutError:
        raise _cut_short(problems.RequestTimeout(
            "The request body was not received in time.")) from None
    except (HttpProcessingError, web.RequestPayloadError):
        # (aiohttp reports a body it cannot decode as a RequestPayloadError.)
        raise _cut_short(problems.BadRequest("The request body is not valid HTTP.")) from None


async def read_json(request: web.Request, content_type: str = "application/json") -> Any:
    """The body as JSON of the given media type: 415 for another type, 400 for bad JSON or
    for an integer beyond 64 bits (naming its place)."""
    if request.content_type != content_type:
        raise problems.UnsupportedMediaType(f"Content-Type must be {content_type}.")
    raw = await read_body(request)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise problems.BadRequest(
            TOO_DEEP if nested_too_deeply(exc) else "The request body is not valid JSON."
        ) from None
    if wide_integers.may_hold_one(raw, body):
        place = wide_integers.place_of_first(raw)
        if place is not None:
            raise problems.invalid(place, wide_integers.MESSAGE)
    return body


async def read_object(request: web.Request, content_type: str = "application/json") -> dict:
    """The body as a JSON object (read_json); another JSON value is a 400 saying so."""
    body = await read_json(request, content_type)
    if not isinstance(body, dict):
        raise problems.BadRequest(NOT_AN_OBJECT)
    return body


NOT_AN_OBJECT = "The request body must be a JSON object."
# orjson reads JSON nested at most this deep; every field's own limit is far below it.
JSON_DEPTH_READ = 1024
TOO_DEEP = (f"The request body nests arrays or objects more than {JSON_DEPTH_READ:,} levels "
            "deep, which no field allows.")


def nested_too_deeply(exc: orjson.JSONDecodeError) -> bool:
    """Whether orjson refused valid JSON for its depth alone (it says so in its message),
    rather than for its syntax."""
    return str(exc).startswith(("depth limit exceeded", "recursion limit"))


def principal(request: web.Request):
    return request[PRINCIPAL]
