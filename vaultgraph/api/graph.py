"""Token graph routes (spec §4.6 to §4.9, plus parents and traversal): parse, call, serialise."""

from __future__ import annotations

from aiohttp import web
from multidict import MultiMapping

from .. import problems
from ..auth.permissions import TOKEN_CREATE, TOKEN_DELETE, TOKEN_READ, requires
from ..http import json_response, principal
from ..pagination import page_body, page_from_query
from ..services.graph import (
    DEFAULT_DEPTH,
    DEFAULT_DIRECTION,
    DIRECTIONS,
    MAX_DEPTH,
    MIN_DEPTH,
    GraphService,
)
from ..typedefs import graph_service_key, settings_key
from .tokens import create_body

routes = web.RouteTableDef()


def service(request: web.Request) -> GraphService:
    return request.app[graph_service_key]


@routes.post("/tokens/{parent_id}/children/{child_id}")
@requires(TOKEN_READ)
async def create_association(request: web.Request) -> web.Response:
    """201 with the link when it is made, 204 when it was already there (idempotent)."""
    link = await service(request).link(principal(request), request.match_info["parent_id"],
                                       request.match_info["child_id"])
    if link is None:
        return web.Response(status=204)
    return json_response(link, status=201)


@routes.delete("/tokens/{parent_id}/children/{child_id}")
@requires(TOKEN_DELETE)
async def delete_association(request: web.Request) -> web.Response:
    await service(request).unlink(principal(request), request.match_info["parent_id"],
                                  request.match_info["child_id"])
    return web.Response(status=204)


@routes.post("/tokens/{parent_id}/children")
@requires(TOKEN_CREATE, TOKEN_READ)
async def create_child_token(request: web.Request) -> web.Response:
    body, deduplicated = await service(request).create_child(
        principal(request), request.match_info["parent_id"], await create_body(request))
    return json_response(body, status=200 if deduplicated else 201)


@routes.get("/tokens/{parent_id}/children")
@requires(TOKEN_READ)
async def list_child_tokens(request: web.Request) -> web.Response:
    return await _related(request, service(request).children, request.match_info["parent_id"])


@routes.get("/tokens/{id}/parents")
@requires(TOKEN_READ)
async def list_parent_tokens(request: web.Request) -> web.Response:
    return await _related(request, service(request).parents, request.match_info["id"])


async def _related(request: web.Request, fetch, token_id: str) -> web.Response:
    """Children or parents: paginated by the last id seen, filtered by id and type."""
    query = request.query
    page = page_from_query(query, request.app[settings_key], cursor_type=str)
    listing = await fetch(principal(request), token_id, page, ids=query.getall("id", []),
                          types=query.getall("type", []))
    return json_response(page_body(listing.items, page, listing.next_after))


@routes.get("/tokens/{id}/graph")
@requires(TOKEN_READ)
async def get_token_graph(request: web.Request) -> web.Response:
    depth, direction = traversal_from_query(request.query)
    return json_response(await service(request).graph(
        principal(request), request.match_info["id"], depth=depth, direction=direction))


def traversal_from_query(query: MultiMapping[str]) -> tuple[int, str]:
    raw = query.get("depth")
    depth = DEFAULT_DEPTH
    if raw is not None:
        if not (raw.isascii() and raw.isdigit()) or not MIN_DEPTH <= int(raw) <= MAX_DEPTH:
            raise problems.invalid("depth", f"must be a whole number from {MIN_DEPTH} to "
                                            f"{MAX_DEPTH}")
        depth = int(raw)
    direction = query.get("direction", DEFAULT_DIRECTION)
    if direction not in DIRECTIONS:
        raise problems.invalid("direction", "must be one of " + ", ".join(DIRECTIONS))
    return depth, direction
