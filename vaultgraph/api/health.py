"""Liveness and readiness."""

from __future__ import annotations

from aiohttp import web

from ..auth.permissions import PUBLIC
from .endpoints import Endpoints, Reply
from .schemas import StatusSchema
from .typedefs import services_key

endpoints = Endpoints()
TAG = "Operations"


@endpoints.get("/health", operation_id="health", summary="Liveness", tag=TAG, access=PUBLIC,
               description="The process answers; no database call.",
               replies=(Reply(200, "Alive.", StatusSchema),))
async def health(request: web.Request):
    return {"status": "ok"}


@endpoints.get("/ready", operation_id="ready", summary="Readiness", tag=TAG, access=PUBLIC,
               replies=(Reply(200, "Neo4j answers.", StatusSchema),), errors=(503,))
async def ready(request: web.Request):
    """Neo4j answers; 503 problem+json (with Retry-After) otherwise."""
    await request.app[services_key].readiness.check()
    return {"status": "ready"}
