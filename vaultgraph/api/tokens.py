"""Token routes (spec §4.1 to §4.5): parse, call the service, serialise."""

from __future__ import annotations

from aiohttp import web

from ..auth.permissions import TOKEN_CREATE, TOKEN_DELETE, TOKEN_READ, TOKEN_UPDATE, requires
from ..http import json_response, principal, read_json
from ..pagination import page_body, page_from_query
from ..services.tokens import TokenService
from ..tokens.schemas import CREATE_TOKEN, UPDATE_TOKEN
from ..typedefs import settings_key, token_service_key

routes = web.RouteTableDef()
MERGE_PATCH = "application/merge-patch+json"
METADATA_PREFIX = "metadata."


def service(request: web.Request) -> TokenService:
    return request.app[token_service_key]


async def create_body(request: web.Request) -> dict:
    body = await read_json(request)
    return CREATE_TOKEN.load(body if isinstance(body, dict) else {"_": body})


@routes.post("/tokens")
@requires(TOKEN_CREATE)
async def create_token(request: web.Request) -> web.Response:
    body, deduplicated = await service(request).create(principal(request),
                                                       await create_body(request))
    return json_response(body, status=200 if deduplicated else 201)


@routes.get("/tokens")
@requires(TOKEN_READ)
async def list_tokens(request: web.Request) -> web.Response:
    query = request.query
    # Token cursors are the last id seen; any other JSON was not issued by this route.
    page = page_from_query(query, request.app[settings_key], cursor_type=str)
    metadata: dict[str, str] = {}
    for key, value in query.items():
        if key.startswith(METADATA_PREFIX):
            # A repeated key is ignored: the first value counts. Keys match case-insensitively,
            # so `metadata.a` and `metadata.A` are the same key.
            metadata.setdefault(key[len(METADATA_PREFIX):].lower(), value)
    listing = await service(request).list(
        principal(request), page, ids=query.getall("id", []), types=query.getall("type", []),
        metadata=metadata)
    return json_response(page_body(listing.items, page, listing.next_after))


@routes.get("/tokens/{id}")
@requires(TOKEN_READ)
async def get_token(request: web.Request) -> web.Response:
    return json_response(await service(request).get(principal(request),
                                                    request.match_info["id"]))


@routes.patch("/tokens/{id}")
@requires(TOKEN_UPDATE)
async def update_token(request: web.Request) -> web.Response:
    raw = await read_json(request, MERGE_PATCH)
    patch = UPDATE_TOKEN.load(raw if isinstance(raw, dict) else {"_": raw})
    return json_response(await service(request).update(principal(request),
                                                       request.match_info["id"], patch))


@routes.delete("/tokens/{id}")
@requires(TOKEN_DELETE)
async def delete_token(request: web.Request) -> web.Response:
    await service(request).delete(principal(request), request.match_info["id"])
    return web.Response(status=204)
