"""Bulk routes (docs/bulk-and-idempotency.md): POST /tokenize and POST /detokenize."""

from __future__ import annotations

import orjson
from aiohttp import web
from marshmallow import ValidationError

from ..auth.permissions import TOKEN_CREATE, TOKEN_READ
from ..errors import Invalid, VaultError, add_error
from ..services.bulk import BulkService
from . import problems
from .endpoints import JSON, Body, Endpoints, Reply
from .middleware import _flatten
from .request_io import principal, read_json
from .tokens import load_create
from .typedefs import services_key, settings_key

endpoints = Endpoints()
TAG = "Bulk"
# An item that is not an object is refused as POST /tokens refuses such a body: by the detail
# alone (no field of the item to name), so `errors` of an answer naming every item names it by
# its place ("1"), like an item's 403 or 409.
NOT_A_REQUEST = "The item must be a create request (a JSON object)."
SHAPE = "must be an array or an object whose values are create requests"
NONE_CREATED = "No item was created; `errors` names each item's problems."

_ANSWER = {"anyOf": [{"$ref": "#/components/schemas/Token"},
                     {"$ref": "#/components/schemas/DeduplicatedToken"},
                     {"$ref": "#/components/schemas/Problem"}]}
_CREATE = {"$ref": "#/components/schemas/CreateToken"}
TOKENIZE_BODY = {
    "description": "Up to `VAULTGRAPH_BULK_MAX_ITEMS` (100) create requests (as `POST "
                   "/tokens` takes them), as an array or as an object whose keys name them.",
    "oneOf": [{"type": "array", "items": _CREATE, "minItems": 1},
              {"type": "object", "additionalProperties": _CREATE, "minProperties": 1}]}
TOKENIZE_ANSWER = {
    "description": "The request's shape, each place holding its token (as `POST /tokens` "
                   "answers it) or its problem.",
    "oneOf": [{"type": "array", "items": _ANSWER},
              {"type": "object", "additionalProperties": _ANSWER}]}
ANY_JSON: dict = {"description": "Any JSON value."}


def service(request: web.Request) -> BulkService:
    return request.app[services_key].bulk


def _load(item) -> dict | VaultError:
    if not isinstance(item, dict):
        return Invalid(NOT_A_REQUEST)
    try:
        return load_create(item)
    except ValidationError as exc:
        return Invalid("The token is invalid.", errors=_flatten(exc.normalized_messages()))


@endpoints.post(
    "/tokenize", operation_id="tokenize", summary="Create many tokens", tag=TAG,
    access=(TOKEN_CREATE,),
    description="Each item is created as `POST /tokens` creates one (validation, "
                "`token:create` on its containers, dedup) and independently of the others: "
                "the answer has the request's shape, each place holding the token or the "
                "item's problem (partial success, 200). When no item is created the answer is "
                "one problem with the first item's status, `errors` naming each item "
                "(`<place>` or `<place>.<field>`). The valid items are written in one "
                "statement.",
    body=Body(TOKENIZE_BODY, "Create requests."),
    replies=(Reply(200, "At least one item was created (or matched, with dedup).",
                   file_schema=TOKENIZE_ANSWER),),
    errors=(409,), raw=True)
async def tokenize(request: web.Request):
    raw = await read_json(request)
    if isinstance(raw, list):
        places = [str(i) for i in range(len(raw))]
        items = raw
    elif isinstance(raw, dict):
        places, items = list(raw), list(raw.values())
    else:
        raise problems.invalid("body", SHAPE)
    limit = request.app[settings_key].bulk_max_items
    if not items:
        raise problems.invalid("body", "must hold at least one create request")
    if len(items) > limit:
        raise problems.invalid("body", f"must hold at most {limit} create requests")
    results = await service(request).tokenize(principal(request), [_load(i) for i in items])
    if all(isinstance(r, VaultError) for r in results):
        first = problems.from_error(results[0])
        errors: dict[str, list[str]] = {}
        for place, error in zip(places, results, strict=True):
            named = (error.errors.items() if isinstance(error, Invalid) and error.errors
                     else [(None, [error.detail])])
            if not all(add_error(errors, place if field is None else f"{place}.{field}",
                                 messages) for field, messages in named):
                break  # the first MAX_LISTED_ERRORS are listed
        first.detail, first.errors = NONE_CREATED, errors
        raise first
    answers = [problems.from_error(r).body() if isinstance(r, VaultError) else r
               for r in results]
    body = answers if isinstance(raw, list) else dict(zip(places, answers, strict=True))
    return web.Response(body=orjson.dumps(body), content_type=JSON)


@endpoints.post(
    "/detokenize", operation_id="detokenize", summary="Put token data into a payload", tag=TAG,
    access=(TOKEN_READ,),
    description="Any JSON. Each string that is one expression `{{ <token id> }}` or "
                "`{{ <token id> | <filters> }}` (the filters of masks and expressions) is "
                "replaced by the token's data as `GET /tokens/{id}` would show it to the "
                "caller (revealed or masked; null when redacted), filtered. Any other string "
                "holding `{{` or `}}` (a nested or partial expression) is a 400, and so is an "
                "id that names no token the caller may read (unknown and unreadable ids "
                "answer alike); `errors` names each failing place. At most "
                "`VAULTGRAPH_BULK_MAX_ITEMS` (100) expressions; the tokens are read in one "
                "statement.",
    body=Body(ANY_JSON, "A payload holding token expressions."),
    replies=(Reply(200, "The payload with the expressions replaced.", file_schema=ANY_JSON),),
    raw=True, reads_only=True)
async def detokenize(request: web.Request):
    payload = await read_json(request)
    out = await service(request).detokenize(principal(request), payload)
    return web.Response(body=orjson.dumps(out), content_type=JSON)
