"""Token graph routes (links, child tokens, children, parents, traversal): declare, parse, call; the
declared schemas dump the answers."""

from __future__ import annotations

from aiohttp import web
from multidict import MultiMapping

from ..auth.permissions import TOKEN_CREATE, TOKEN_DELETE, TOKEN_READ
from ..services.graph import (
    DEFAULT_DEPTH,
    DEFAULT_DIRECTION,
    DIRECTIONS,
    MAX_DEPTH,
    MIN_DEPTH,
    GraphService,
)
from ..tokens.schemas import ChildTokenSchema, CreateTokenSchema, DeduplicatedChildTokenSchema
from . import problems
from .endpoints import Body, Endpoints, Reply
from .filters import token_ids
from .paging import page_body, page_from_query
from .request_io import principal
from .schemas import (
    LINK_PATH,
    PARENT_PATH,
    TOKEN_PATH,
    AssociationSchema,
    GraphQuery,
    PageQuery,
    TokenFilterQuery,
    TokenGraphSchema,
    TokenPageSchema,
)
from .tokens import create_body
from .typedefs import services_key, settings_key

endpoints = Endpoints()
TAG = "Associations"


def service(request: web.Request) -> GraphService:
    return request.app[services_key].graph


@endpoints.post(
    "/tokens/{parent_id}/children/{child_id}", operation_id="createAssociation",
    summary="Link a parent token to a child token", tag=TAG, access=(TOKEN_READ,),
    path_params=LINK_PATH,
    description="`token:read` on both tokens: an end that is unknown, expired, outside the "
                "caller's rules or in another tenant answers 404 like an unknown token. "
                "Idempotent: linking again changes nothing (204). A two-way link is two "
                "associations. A token cannot be its own child (400).",
    replies=(Reply(201, "Linked.", AssociationSchema),
             Reply(204, "Already linked: nothing changed, no body.")),
    errors=(400, 404))
async def create_association(request: web.Request):
    link = await service(request).link(principal(request), request.match_info["parent_id"],
                                       request.match_info["child_id"])
    return (204, None) if link is None else (201, link)


@endpoints.delete(
    "/tokens/{parent_id}/children/{child_id}", operation_id="deleteAssociation",
    summary="Unlink a child token from its parent", tag=TAG, access=(TOKEN_DELETE,),
    path_params=LINK_PATH,
    description="`token:delete` on both tokens: an end outside the caller's rules answers 404 "
                "like an unknown token. 404 too when there is no link from that parent to that "
                "child; 400 when both ids are the same. The tokens themselves stay.",
    replies=(Reply(204, "Unlinked."),), errors=(400, 404))
async def delete_association(request: web.Request):
    await service(request).unlink(principal(request), request.match_info["parent_id"],
                                  request.match_info["child_id"])


@endpoints.post(
    "/tokens/{parent_id}/children", operation_id="createChildToken",
    summary="Create a child token", tag=TAG, access=(TOKEN_CREATE, TOKEN_READ),
    path_params=PARENT_PATH,
    description="`token:create` on the child's containers, `token:read` on the parent (404 "
                "like an unknown token otherwise). The token and its link are written "
                "together: both or neither. The response omits data, mask and search_indexes.",
    body=Body(CreateTokenSchema, "The child token (as Create Token)."),
    replies=(Reply(201, "The child token created and linked.", ChildTokenSchema),
             Reply(200, "`deduplicate_token` matched an existing token, returned instead "
                        "(`_extras.deduplicated`); it is linked under the parent when the "
                        "caller may read it, and left unlinked otherwise.",
                   DeduplicatedChildTokenSchema)),
    errors=(404, 409))
async def create_child_token(request: web.Request):
    body, deduplicated = await service(request).create_child(
        principal(request), request.match_info["parent_id"], await create_body(request))
    return (200 if deduplicated else 201), body


@endpoints.get(
    "/tokens/{parent_id}/children", operation_id="listChildTokens",
    summary="List child tokens", tag=TAG, access=(TOKEN_READ,), path_params=PARENT_PATH,
    query=(TokenFilterQuery, PageQuery),
    replies=(Reply(200, "A page of child tokens.", TokenPageSchema),), errors=(404,))
async def list_child_tokens(request: web.Request):
    return await _related(request, service(request).children, request.match_info["parent_id"])


@endpoints.get(
    "/tokens/{id}/parents", operation_id="listParentTokens", summary="List parent tokens",
    tag=TAG, access=(TOKEN_READ,), path_params=TOKEN_PATH, query=(TokenFilterQuery, PageQuery),
    replies=(Reply(200, "A page of parent tokens.", TokenPageSchema),), errors=(404,))
async def list_parent_tokens(request: web.Request):
    return await _related(request, service(request).parents, request.match_info["id"])


async def _related(request: web.Request, fetch, token_id: str) -> dict:
    """Children or parents: paginated by the last id seen, filtered by id and type."""
    query = request.query
    page = page_from_query(query, request.app[settings_key], cursor_type=str)
    listing = await fetch(principal(request), token_id, page, ids=token_ids(query, "id"),
                          types=query.getall("type", []))
    return page_body(listing.items, page, listing.next_after)


@endpoints.get(
    "/tokens/{id}/graph", operation_id="getTokenGraph", summary="Get the graph around a token",
    tag=TAG, access=(TOKEN_READ,), path_params=TOKEN_PATH, query=(GraphQuery,),
    description="The token, the tokens linked to it within `depth` links that the caller may "
                "read (following `direction`), and the links among them. A bad `depth` or "
                "`direction` is a 400 naming it.",
    replies=(Reply(200, "The graph.", TokenGraphSchema),), errors=(404,))
async def get_token_graph(request: web.Request):
    depth, direction = traversal_from_query(request.query)
    return await service(request).graph(principal(request), request.match_info["id"],
                                        depth=depth, direction=direction)


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
