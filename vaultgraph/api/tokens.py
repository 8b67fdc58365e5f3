"""Token routes (create, list, get, update, delete): declare, parse, call the service; the
declared schemas dump the answers."""

from __future__ import annotations

from aiohttp import web

from ..auth.permissions import TOKEN_CREATE, TOKEN_DELETE, TOKEN_READ, TOKEN_UPDATE
from ..services.tokens import TokenService
from ..tokens.schemas import (
    CreateTokenSchema,
    DeduplicatedTokenSchema,
    TokenSchema,
    UpdateTokenSchema,
)
from .endpoints import MERGE_PATCH_JSON, Body, Endpoints, Reply
from .filters import metadata_filters, token_ids
from .loading import compile_loader
from .paging import page_body, page_from_query
from .request_io import principal, read_object
from .schemas import TOKEN_PATH, PageQuery, TokenListQuery, TokenPageSchema
from .typedefs import services_key, settings_key

endpoints = Endpoints()
MERGE_PATCH = MERGE_PATCH_JSON
TAG = "Tokens"
# What CreateTokenSchema().load and UpdateTokenSchema().load give, compiled once (loading.py).
load_create = compile_loader(CreateTokenSchema)
load_update = compile_loader(UpdateTokenSchema)


def service(request: web.Request) -> TokenService:
    return request.app[services_key].tokens


async def create_body(request: web.Request) -> dict:
    return load_create(await read_object(request))


@endpoints.post(
    "/tokens", operation_id="createToken", summary="Create a token", tag=TAG,
    access=(TOKEN_CREATE,),
    description="`token:create` on the token's containers (403 otherwise).",
    body=Body(CreateTokenSchema, "The token to create."),
    replies=(Reply(201, "The token created.", TokenSchema),
             Reply(200, "`deduplicate_token` matched an existing token, returned instead "
                        "(`_extras.deduplicated`).", DeduplicatedTokenSchema)),
    errors=(409,))
async def create_token(request: web.Request):
    body, deduplicated = await service(request).create(principal(request),
                                                       await create_body(request))
    return (200 if deduplicated else 201), body


@endpoints.get(
    "/tokens", operation_id="listTokens", summary="List tokens", tag=TAG, access=(TOKEN_READ,),
    description="Filters are ANDed. `metadata.<key>=<value>` (repeatable with distinct keys) "
                "matches metadata exactly and case-insensitively; a repeated key is ignored. "
                "A filter no token could match is a 400 naming it: an `id` that is not a "
                "token id (3 to 400 characters), a `<key>` outside 1 to 128 characters or "
                "holding a control character, a `<value>` over 1024 characters. An unknown "
                "`type` matches nothing. "
                "Data is returned per the caller's access rules.",
    query=(TokenListQuery, PageQuery),
    replies=(Reply(200, "A page of tokens.", TokenPageSchema),))
async def list_tokens(request: web.Request):
    query = request.query
    # Token cursors are the last id seen; any other JSON was not issued by this route.
    page = page_from_query(query, request.app[settings_key], cursor_type=str)
    listing = await service(request).list(
        principal(request), page, ids=token_ids(query, "id"), types=query.getall("type", []),
        metadata=metadata_filters(query))
    return page_body(listing.items, page, listing.next_after)


@endpoints.get(
    "/tokens/{id}", operation_id="getToken", summary="Get a token", tag=TAG,
    access=(TOKEN_READ,), path_params=TOKEN_PATH,
    replies=(Reply(200, "The token, with data per the caller's access rules.", TokenSchema),),
    errors=(404,))
async def get_token(request: web.Request):
    return await service(request).get(principal(request), request.match_info["id"])


@endpoints.patch(
    "/tokens/{id}", operation_id="updateToken", summary="Update a token", tag=TAG,
    access=(TOKEN_UPDATE,), path_params=TOKEN_PATH,
    description="`token:update` on the token, and on its new containers when it moves. "
                "Changing `mask`, `fingerprint_expression` or `search_indexes`, or moving the "
                "token into containers where the caller would read more of it, also needs a "
                "rule that reveals the token to the caller (403): plaintext always takes a "
                "reveal rule.\n\n"
                "When the update makes the token equal to an existing one under "
                "`deduplicate_token`, the two are merged and the existing token is returned, "
                "redacted if the caller may not read it.",
    body=Body(UpdateTokenSchema, "A JSON merge patch (RFC 7386).", MERGE_PATCH_JSON),
    replies=(Reply(200, "The updated token.", TokenSchema),), errors=(404,))
async def update_token(request: web.Request):
    patch = load_update(await read_object(request, MERGE_PATCH))
    return await service(request).update(principal(request), request.match_info["id"], patch)


@endpoints.delete(
    "/tokens/{id}", operation_id="deleteToken", summary="Delete a token", tag=TAG,
    access=(TOKEN_DELETE,), path_params=TOKEN_PATH,
    description="Data is removed for good; an audit reference of the token remains.",
    replies=(Reply(204, "Deleted."),), errors=(404,))
async def delete_token(request: web.Request):
    await service(request).delete(principal(request), request.match_info["id"])
