"""The OpenAPI 3.1 document, generated from the endpoint declarations (api/endpoints.py).

apispec's MarshmallowPlugin turns the request, response, path and query schemas into JSON
Schema; this module adds what the declarations state besides (access, problem answers) and the
bounds the running Settings decide: a field's `metadata["limits"]` maps an OpenAPI keyword to a
Settings field, and a description may name a Settings field as `{field}`.

Only routes registered on the app are described, so `/openapi.json` never names a route that
does not exist, and a route without a declaration is neither described nor served (403).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from importlib.metadata import PackageNotFoundError, version

from aiohttp import web
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from marshmallow import Schema

from ..applications import schemas as applications
from ..auth.apikeys import HEADER as API_KEY_HEADER
from ..auth.permissions import AUTHENTICATED, PUBLIC
from ..settings import Settings
from ..tokens import schemas as tokens
from ..webhooks import schemas as webhooks
from . import proxies, schemas
from .endpoints import JSON, PROBLEM_JSON, Endpoint, endpoint_of
from .problems import ProblemSchema


@dataclass(frozen=True)
class PublishedDocument:
    """The served document, serialised once at start-up, with its ETag."""

    body: bytes
    etag: str


OPENAPI_VERSION = "3.1.0"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Registered beside every GET by aiohttp (HEAD) or answered generically: never described.
UNDESCRIBED_METHODS = ("head", "options")
Operation = tuple[str, str]  # (lower-case method, path template)

DESCRIPTION = """\
A token vault whose tokens are nodes in Neo4j.

Every operation except the public ones takes an application's API key in the `SVC-API-KEY`
header; `x-permission` on each operation names the permissions it needs. Errors are
`application/problem+json`. Every response carries `SVC-TRACE-ID`: the trace id of the request's
W3C `traceparent`, else its `SVC-TRACE-ID` when that is a W3C trace id (32 lower-case hex
digits, not all zero), else a new one.

Lists are paged by cursor: `size` (items per page) and `start` (the `pagination.next` of the
previous page, opaque).
"""
TAGS = (
    {"name": "Tokens", "description": "Create, read, update and delete tokens."},
    {"name": "Bulk", "description": "Many tokens in one request: tokenize and detokenize."},
    {"name": "Associations", "description": "Parent → child links between tokens."},
    {"name": "Applications", "description": "Applications, their access rules and their API "
                                            "keys."},
    {"name": "Proxies", "description": "Outbound proxies: use tokens in requests to a third "
                                       "party without seeing their data."},
    {"name": "Webhooks", "description": "Signed events of token changes, POSTed to your "
                                        "endpoints (Standard Webhooks), at least once."},
    {"name": "Operations", "description": "Health, readiness and this documentation."},
)

# Named components: every schema an endpoint names, and those they nest.
SCHEMAS: dict[str, type[Schema]] = {
    "Problem": ProblemSchema,
    "Status": schemas.StatusSchema,
    "Pagination": schemas.PaginationSchema,
    "Extras": tokens.ExtrasSchema,
    "Token": tokens.TokenSchema,
    "DeduplicatedToken": tokens.DeduplicatedTokenSchema,
    "ChildToken": tokens.ChildTokenSchema,
    "DeduplicatedChildToken": tokens.DeduplicatedChildTokenSchema,
    "CreateToken": tokens.CreateTokenSchema,
    "UpdateToken": tokens.UpdateTokenSchema,
    "TokenPage": schemas.TokenPageSchema,
    "Association": schemas.AssociationSchema,
    "Edge": schemas.EdgeSchema,
    "TokenGraph": schemas.TokenGraphSchema,
    "AccessRuleInput": applications.RuleSchema,
    "ApplicationInput": applications.ApplicationSchema,
    "AccessRule": applications.AccessRuleSchema,
    "Application": applications.ApplicationBodySchema,
    "NewApplication": applications.NewApplicationSchema,
    "OwnApplication": applications.OwnApplicationSchema,
    "ApplicationPage": schemas.ApplicationPageSchema,
    "ApiKey": applications.ApiKeySchema,
    "IssuedApiKey": applications.IssuedApiKeySchema,
    "ApiKeyList": applications.ApiKeyListSchema,
    "ProxyInput": proxies.ProxySchema,
    "ProxyPatch": proxies.ProxyPatchSchema,
    "Proxy": proxies.ProxyBodySchema,
    "ProxyPage": proxies.ProxyPageSchema,
    "WebhookInput": webhooks.CreateWebhookSchema,
    "UpdateWebhook": webhooks.UpdateWebhookSchema,
    "Webhook": webhooks.WebhookSchema,
    "NewWebhook": webhooks.NewWebhookSchema,
    "WebhookSecret": webhooks.SecretSchema,
    "WebhookTestEvent": webhooks.TestEventSchema,
    "WebhookAttempt": webhooks.AttemptSchema,
    "WebhookRetriedDelivery": webhooks.RetriedDeliverySchema,
}
EXAMPLES = {"CreateToken": [tokens.CARD_EXAMPLE]}

# Problem answers: the shared response of each status (components/responses).
PROBLEM_RESPONSES = {
    400: ("BadRequest", "The request is invalid; `errors` names the fields."),
    401: ("Unauthorized", "The API key is missing, unknown or revoked."),
    403: ("Forbidden", "The application lacks the permission for this operation, or the "
                       "access the request needs (`detail` says which: a write's containers, a "
                       "reveal rule an update needs, an application holding access the caller "
                       "lacks)."),
    404: ("NotFound", "No such resource, or one the caller may not see (the same answer)."),
    409: ("Conflict", "The id is taken, or the event is being sent to the webhook now; or, "
                      "under an `Idempotency-Key`, its first request is still running (type "
                      "`…/idempotency-key-in-flight`, with `Retry-After` seconds), or was "
                      "carried out and its answer is not shown (type `…/conflict`; retrying "
                      "does not change it)."),
    413: ("PayloadTooLarge", "The request body is too large."),
    415: ("UnsupportedMediaType", "The request body has the wrong Content-Type."),
    422: ("IdempotencyKeyReused", "The `Idempotency-Key` was first sent with another request "
                                  "(method, path or body)."),
    429: ("TooManyRequests", "The application is over its rate limit, or this address has "
                             "failed authentication too often; retry after `Retry-After` "
                             "seconds."),
    502: ("BadGateway", "The proxy's destination could not be reached, refused by the "
                        "address policy, too slow or answering too much (`detail` names the "
                        "proxy)."),
    503: ("Unavailable", "Neo4j is unavailable; retry after `Retry-After` seconds."),
}
IDEMPOTENCY_KEY = {
    "in": "header", "name": "Idempotency-Key", "required": False,
    "description": "Makes a retry safe: the first response under this key (per application) "
                   "is kept for 24 h and replayed, with `Idempotent-Replayed: true`, to a "
                   "retry of the same request (docs/bulk-and-idempotency.md).",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255,
               "pattern": "^[\\x21-\\x7e]+$"}}
IDEMPOTENCY_ERRORS = (400, 409, 422)  # a bad key; the key's request in flight; another request
BODY_ERRORS = (400, 413, 415)  # every operation with a request body can answer these
QUERY_ERRORS = (400,)  # and every operation with query parameters these
# JSON Schema keywords apispec does not pass through from field metadata.
_EXTRA_KEYWORDS = ("propertyNames", "const")


def document(settings: Settings, endpoints: Iterable[Endpoint]) -> dict:
    """The OpenAPI document of these endpoints, with the limits of these settings."""
    endpoints = list(endpoints)
    plugin = MarshmallowPlugin()
    spec = APISpec(
        title="vaultgraph", version=_package_version(), openapi_version=OPENAPI_VERSION,
        plugins=[plugin],
        info={"description": DESCRIPTION,
              "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"}},
        servers=[{"url": "/", "description": "The server this document came from."}],
        tags=[tag for tag in TAGS if any(e.tag == tag["name"] for e in endpoints)],
        security=[{"apiKey": []}],
    )
    plugin.converter.add_attribute_function(_settings_keywords(settings))
    spec.components.security_scheme("apiKey", {
        "type": "apiKey", "in": "header", "name": API_KEY_HEADER,
        "description": "An application's API key (`vg_…`), shown once when it is issued."})
    for status, (name, description) in PROBLEM_RESPONSES.items():
        response = {"description": f"{HTTPStatus(status).phrase}: {description}",
                    "content": {PROBLEM_JSON: {"schema": "Problem"}}}
        if status in (409, 429, 503):  # a 409 only when an Idempotency-Key is in flight
            response["headers"] = {"Retry-After": {"schema": {"type": "integer"}}}
        spec.components.response(name, response)
    for name, schema in SCHEMAS.items():
        component: dict = {}
        if schema.__doc__:
            component["description"] = " ".join(schema.__doc__.split())
        if name in EXAMPLES:
            component["examples"] = EXAMPLES[name]
        spec.components.schema(name, component, schema=schema)
    paths: dict[str, dict] = {}
    for endpoint in endpoints:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint)
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    return spec.to_dict()


def app_endpoints(router: web.UrlDispatcher) -> list[Endpoint]:
    """The declarations of the routes registered on this router (HEAD and OPTIONS aside)."""
    out = []
    for route in router.routes():
        if route.method.lower() in UNDESCRIBED_METHODS:
            continue
        endpoint = endpoint_of(route.handler)
        if endpoint is not None:
            out.append(endpoint)
    return out


def described_operations(document: dict) -> set[Operation]:
    return {(method, path) for path, item in document["paths"].items()
            for method in item if method in METHODS}


def operation_of(document: dict, operation: Operation) -> dict | None:
    method, path = operation
    return document["paths"].get(path, {}).get(method)


def _operation(endpoint: Endpoint) -> dict:
    op: dict = {"operationId": endpoint.operation_id, "summary": endpoint.summary,
                "tags": [endpoint.tag],
                "description": "\n\n".join(filter(None, (_needs(endpoint.access),
                                                         endpoint.description)))}
    parameters = []
    if endpoint.path_params is not None:
        parameters.append({"in": "path", "schema": endpoint.path_params})
    parameters += [{"in": "query", "schema": query} for query in endpoint.query]
    protected = endpoint.access != PUBLIC
    idempotent = protected and endpoint.method == "POST" and not endpoint.reads_only
    if idempotent:
        parameters.append(IDEMPOTENCY_KEY)
    if parameters:
        op["parameters"] = parameters
    if endpoint.body is not None:
        op["requestBody"] = {"required": True, "description": endpoint.body.description,
                             "content": {endpoint.body.media_type: {
                                 "schema": endpoint.body.schema}}}
    codes = list(endpoint.errors)
    if endpoint.access == PUBLIC:
        op["security"] = []
    elif endpoint.access == AUTHENTICATED:
        op["x-permission"] = []
        codes += (401, 429, 503)
    else:
        op["x-permission"] = list(endpoint.access)
        codes += (401, 403, 429, 503)
    if idempotent:
        codes += IDEMPOTENCY_ERRORS
    if endpoint.body is not None:
        codes += BODY_ERRORS
    if endpoint.query:
        codes += QUERY_ERRORS
    responses: dict = {}
    for reply in endpoint.replies:
        response: dict = {"description": reply.description}
        if reply.schema is not None:
            response["content"] = {reply.media_type: {"schema": reply.schema}}
        elif reply.file_schema is not None:
            response["content"] = {reply.media_type: {"schema": reply.file_schema}}
        if reply.headers:
            response["headers"] = reply.headers
        responses[str(reply.status)] = response
    for code in sorted(set(codes)):
        responses.setdefault(str(code), PROBLEM_RESPONSES[code][0])
    op["responses"] = responses
    return op


def _needs(access: tuple[str, ...] | str) -> str:
    # Renderers do not all show `x-permission`; readers see it here too.
    if access == PUBLIC:
        return "**Public**: no API key."
    if access == AUTHENTICATED:
        return "**Permission**: none beyond a working API key."
    return "**Permission**: " + " and ".join(f"`{p}`" for p in access) + "."


def _settings_keywords(settings: Settings):
    values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}

    def settings_keywords(self, field, ret, **kwargs) -> dict:
        metadata = field.metadata
        out = {key: metadata[key] for key in _EXTRA_KEYWORDS if key in metadata}
        limits = metadata.get("limits")
        if limits is None:
            return out
        out.update({keyword: values[name] for keyword, name in limits.items()})
        description = ret.get("description")
        if description:
            for name, value in values.items():
                description = description.replace("{" + name + "}", str(value))
            out["description"] = description
        return out

    return settings_keywords


def _package_version() -> str:
    try:
        return version("vaultgraph")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0"


__all__ = ["JSON", "PublishedDocument", "app_endpoints", "document"]
