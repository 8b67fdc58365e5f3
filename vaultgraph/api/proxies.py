"""Outbound proxies (docs/proxy.md): their management, and calls through them.

`/proxies[/{id}]` keeps a tenant's proxies; `/proxy/{proxy_id}/{path}` sends a request to the
proxy's destination with the token expressions in its body (and allowed headers) replaced by
the tokens' data, and answers with the destination's status, body and content type. The
caller never sees the data; the destination does.
"""

from __future__ import annotations

import uuid

from aiohttp import web
from marshmallow import RAISE, Schema, fields, validate

from ..applications.schemas import name_rules
from ..audit import context as audit_context
from ..auth.permissions import PROXY_CREATE, PROXY_DELETE, PROXY_READ, PROXY_UPDATE, TOKEN_USE
from ..services.proxy import (
    CALL_TIME_LIMIT,
    MAX_BYTES,
    MAX_EXPRESSIONS,
    MAX_HEADER_ALLOWLIST,
    Call,
    Proxy,
    ProxyService,
)
from ..tokens.fields import format_datetime
from ..tokens.schemas import DATE_TIME, UUID
from . import problems
from .endpoints import MERGE_PATCH_JSON, Body, Endpoints, Reply
from .paging import page_body, page_from_query
from .request_io import principal, read_body, read_object
from .schemas import PageQuery, page_of, path
from .typedefs import services_key, settings_key

endpoints = Endpoints()
TAG = "Proxies"
MAX_NAME = 200
MAX_DESCRIPTION = 1000
PROXY_STATUS = "SVC-PROXY-STATUS"
FORWARDED_SAFETY = {"X-Content-Type-Options": "nosniff",
                    "Content-Security-Policy": "default-src 'none'; sandbox"}
CALL_PATTERN = r"/proxy/{proxy_id:[^{}/]+}/{path:.*}"
CALL_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# Served, not in /openapi.json (aiohttp answers HEAD with the GET route).
UNDESCRIBED_CALL_METHODS = ("OPTIONS",)


class ProxySchema(Schema):
    """A new proxy."""

    class Meta:
        unknown = RAISE

    name = fields.String(required=True, validate=name_rules(MAX_NAME))
    destination_url = fields.String(required=True, metadata={
        "format": "uri", "description": "`https` (unless the vault allows http); no query, "
        "fragment or credentials; not a loopback, private, link-local or reserved address, "
        "then or at any call (a host name is resolved and checked on each call)."})
    description = fields.String(allow_none=True, validate=validate.Length(max=MAX_DESCRIPTION))
    header_allowlist = fields.List(
        fields.String(validate=validate.Length(min=1, max=100)),
        validate=validate.Length(max=MAX_HEADER_ALLOWLIST), metadata={
            "description": "Headers whose values may hold token expressions (default none)."})


class ProxyPatchSchema(Schema):
    """A JSON merge patch of a proxy: the fields given are replaced; `null` removes the
    description and empties the allowlist."""

    class Meta:
        unknown = RAISE

    name = fields.String(validate=name_rules(MAX_NAME))
    destination_url = fields.String(metadata={"format": "uri"})
    description = fields.String(allow_none=True, validate=validate.Length(max=MAX_DESCRIPTION))
    header_allowlist = fields.List(fields.String(validate=validate.Length(min=1, max=100)),
                                   allow_none=True,
                                   validate=validate.Length(max=MAX_HEADER_ALLOWLIST))


class ProxyBodySchema(Schema):
    """An outbound proxy."""

    id = fields.String(required=True, metadata=UUID)
    name = fields.String(required=True)
    destination_url = fields.String(required=True)
    description = fields.String(allow_none=True)
    header_allowlist = fields.List(fields.String(), required=True)
    created_at = fields.String(required=True, metadata=DATE_TIME)
    created_by = fields.String(required=True, allow_none=True, metadata=UUID)
    modified_at = fields.String(metadata=DATE_TIME)


ProxyPageSchema = page_of(ProxyBodySchema, "ProxyPageSchema")


PROXY_PATH = path(id=fields.String(required=True, metadata={**UUID,
                                                             "description": "Proxy id."}))
CALL_PATH = path(
    proxy_id=fields.String(required=True, metadata={**UUID, "description": "Proxy id."}),
    path=fields.String(required=True, metadata={
        "description": "The path under the destination URL (may be empty; may hold `/`). No "
                       "`.`/`..` segments, encoded dots or slashes, empty segments, absolute "
                       "URLs, unencoded characters a URL path cannot hold, or `{{` (expressions "
                       "are not replaced in the path) (400)."}))
_NEW = ProxySchema()
_PATCH = ProxyPatchSchema()


def service(request: web.Request) -> ProxyService:
    return request.app[services_key].proxies


def proxy_body(proxy: Proxy) -> dict:
    out = {"id": proxy.id, "name": proxy.name, "destination_url": proxy.destination_url,
           "description": proxy.description, "header_allowlist": list(proxy.header_allowlist),
           "created_at": format_datetime(proxy.created_at), "created_by": proxy.created_by}
    if proxy.modified_at is not None:
        out["modified_at"] = format_datetime(proxy.modified_at)
    return out


@endpoints.post(
    "/proxies", operation_id="createProxy", summary="Create an outbound proxy", tag=TAG,
    access=(PROXY_CREATE,),
    description="The destination URL is checked by the outbound address policy (400 naming "
                "`destination_url`).",
    body=Body(ProxySchema, "The proxy."),
    replies=(Reply(201, "The proxy created.", ProxyBodySchema),))
async def create_proxy(request: web.Request):
    created = await service(request).create(principal(request),
                                            _NEW.load(await read_object(request)))
    return 201, proxy_body(created)


@endpoints.get(
    "/proxies", operation_id="listProxies", summary="List outbound proxies", tag=TAG,
    access=(PROXY_READ,), query=(PageQuery,),
    replies=(Reply(200, "A page of the tenant's proxies, oldest first.", ProxyPageSchema),))
async def list_proxies(request: web.Request):
    page = page_from_query(request.query, request.app[settings_key])
    proxies, position = await service(request).page(principal(request), page.size, page.after)
    return page_body([proxy_body(p) for p in proxies], page,
                     list(position) if position else None)


@endpoints.get(
    "/proxies/{id}", operation_id="getProxy", summary="Get an outbound proxy", tag=TAG,
    access=(PROXY_READ,), path_params=PROXY_PATH,
    replies=(Reply(200, "The proxy.", ProxyBodySchema),), errors=(404,))
async def get_proxy(request: web.Request):
    return proxy_body(await service(request).get(principal(request), request.match_info["id"]))


@endpoints.patch(
    "/proxies/{id}", operation_id="updateProxy", summary="Update an outbound proxy", tag=TAG,
    access=(PROXY_UPDATE,), path_params=PROXY_PATH,
    body=Body(ProxyPatchSchema, "A JSON merge patch (RFC 7386).", MERGE_PATCH_JSON),
    replies=(Reply(200, "The updated proxy.", ProxyBodySchema),), errors=(404,))
async def update_proxy(request: web.Request):
    patch = _PATCH.load(await read_object(request, MERGE_PATCH_JSON))
    return proxy_body(await service(request).update(principal(request),
                                                    request.match_info["id"], patch))


@endpoints.delete(
    "/proxies/{id}", operation_id="deleteProxy", summary="Delete an outbound proxy", tag=TAG,
    access=(PROXY_DELETE,), path_params=PROXY_PATH,
    replies=(Reply(204, "Deleted: calls through it answer 404 from now on."),), errors=(404,))
async def delete_proxy(request: web.Request):
    await service(request).delete(principal(request), request.match_info["id"])


# -- calls ----------------------------------------------------------------------------------------

CALL_DESCRIPTION = (
    "Forwards the request to the proxy's `destination_url` + `/{path}` + the query. Every "
    "`{{ <token id> }}` or `{{ <token id> | <filter> }}` in a JSON, form-encoded, XML "
    "(escaped) or text/plain body, and in the headers the proxy's `header_allowlist` names, is "
    "replaced by the token's data (one filter at most, among last4, card_bin, card_mask, "
    "reveal_last, card_exp and json, or a `json: \"<$.path>\"` selection then one of the others "
    "but json, as `json: \"$.number\" | last4`), under `token:use` on the token's containers — "
    "whatever the caller's read transform: the caller never sees the data. In JSON, a string "
    "that is one whole expression becomes the data itself (any JSON value); elsewhere the "
    "data's text (JSON for objects). Unknown, foreign and unusable tokens are one 400 with the "
    "same text, and nothing is sent. A `{{` in the path, the query or a forwarded header the "
    f"allowlist does not name is a 400. At most {MAX_EXPRESSIONS} expressions. `SVC-API-KEY`, "
    "cookies and hop-by-hop headers are not forwarded; `Host` is the destination's; "
    "`Idempotency-Key` is forwarded, not interpreted. No redirect is followed; "
    f"{CALL_TIME_LIMIT:g} s and {MAX_BYTES} bytes each way. The answer is the destination's "
    f"status, body and `Content-Type`, with `{PROXY_STATUS}: forwarded`; 413 when the body "
    "is too large once rendered; 415 for a compressed body (`Content-Encoding`); 429 when the "
    "tenant has too many calls waiting on destinations; 502 when the destination cannot be "
    "reached or is too slow (never 504). HEAD and OPTIONS are served too, not described here.")
CALL_REPLY = Reply(200, "The destination's answer: its status (any), body and content type.",
                   media_type="*/*", file_schema={"description": "The destination's body."},
                   headers={PROXY_STATUS: {"description": "`forwarded`: the destination "
                                                          "answered.",
                                           "schema": {"type": "string", "enum": ["forwarded"]}}})


async def call_proxy(request: web.Request) -> web.StreamResponse:
    proxy_id = request.match_info["proxy_id"]
    _note_proxy(request, proxy_id)
    if request.headers.get("Content-Encoding", "identity").lower() != "identity":
        raise problems.UnsupportedMediaType("The proxy takes uncompressed request bodies.")
    # The raw path: match_info's is decoded, which would hide an encoded `/` or `..`.
    tail = request.rel_url.raw_path.split("/", 3)[3]  # "", "proxy", the id, the rest
    body = await read_body(request)
    call = Call(method=request.method, path=tail, query=request.rel_url.raw_query_string,
                headers=list(request.headers.items()), body=body,
                media_type=request.content_type.lower() if body else None,
                charset=request.charset)
    answer = await service(request).call(principal(request), proxy_id, call)
    response = web.Response(status=answer.status, body=answer.body)
    if answer.content_type:
        response.headers["Content-Type"] = answer.content_type
    response.headers[PROXY_STATUS] = "forwarded"
    # The destination's body is served from the vault's origin: a browser that reaches it must
    # neither guess its type nor run it (a destination answering HTML would script the vault's
    # origin otherwise).
    response.headers.update(FORWARDED_SAFETY)
    return response


def _note_proxy(request: web.Request, proxy_id: str) -> None:
    """The call's audit event names the proxy in its route (a proxy id is no secret; anything
    else in the path stays out of the event)."""
    try:
        named = str(uuid.UUID(proxy_id))
    except ValueError:
        return
    audit_context.note_route(f"{request.method} /proxy/{named}/{{path}}")


for _method in CALL_METHODS + UNDESCRIBED_CALL_METHODS:
    endpoints.route(
        _method, "/proxy/{proxy_id}/{path}", pattern=CALL_PATTERN,
        operation_id=f"proxy{_method.title()}", summary=f"Call a proxy's destination "
        f"({_method})", tag=TAG, access=(TOKEN_USE,), path_params=CALL_PATH,
        description=CALL_DESCRIPTION, replies=(CALL_REPLY,), errors=(400, 404, 413, 415, 502),
        raw=True, reads_only=True)(call_proxy)
