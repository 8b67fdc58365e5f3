"""Response helpers shared by every handler."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from . import problems
from .endpoints import compile_dumper
from .typedefs import PRINCIPAL

PROBLEM_JSON = "application/problem+json"


_PROBLEM = compile_dumper(problems.ProblemSchema)


def problem_response(problem: problems.Problem) -> web.Response:
    return web.Response(body=orjson.dumps(_PROBLEM(problem.body())), status=problem.status,
                        headers=problem.headers, content_type=PROBLEM_JSON)


async def read_json(request: web.Request, content_type: str = "application/json") -> Any:
    """The body as JSON of the given media type: 415 for another type, 400 for bad JSON."""
    if request.content_type != content_type:
        raise problems.UnsupportedMediaType(f"Content-Type must be {content_type}.")
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise problems.BadRequest("The request body is not valid JSON.") from None


def principal(request: web.Request):
    return request[PRINCIPAL]
