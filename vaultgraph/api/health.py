"""Liveness and readiness."""

from __future__ import annotations

from aiohttp import web

from ..auth.permissions import public
from ..http import json_response
from ..typedefs import database_key

routes = web.RouteTableDef()


@routes.get("/health")
@public
async def health(request: web.Request) -> web.Response:
    """The process is alive (no database call)."""
    return json_response({"status": "ok"})


@routes.get("/ready")
@public
async def ready(request: web.Request) -> web.Response:
    """Neo4j answers; 503 problem+json (with Retry-After) otherwise."""
    await request.app[database_key].ping()
    return json_response({"status": "ready"})
