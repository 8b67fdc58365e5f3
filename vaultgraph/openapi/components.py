"""Reusable schemas, parameters, responses and the security scheme of the description."""

from __future__ import annotations

from ..auth.permissions import ALL_PERMISSIONS, TOKEN_PERMISSIONS
from ..auth.rules import TRANSFORMS
from ..expressions import DEFAULT_FINGERPRINT_EXPRESSION
from ..services.applications import MAX_DESCRIPTION, MAX_NAME, MAX_PRIORITY, MAX_RULES
from ..services.graph import (
    DEFAULT_DEPTH,
    DEFAULT_DIRECTION,
    DIRECTIONS,
    MAX_DEPTH,
    MAX_LINKS_PER_LEVEL,
    MAX_NODES,
    MIN_DEPTH,
)
from ..settings import Settings
from ..tokens.fields import TOKEN_ID_MAX_LENGTH, TOKEN_ID_MIN_LENGTH
from ..tokens.schemas import MAX_EXPRESSION, MAX_METADATA_KEY, MAX_METADATA_VALUE
from ..tokens.types import TOKEN_TYPES
from ..tokens.view import CHILD_FIELDS, SUMMARY_FIELDS
from .shapes import PROBLEM_JSON, PROBLEM_RESPONSES, content, query, ref, status_phrase

API_KEY_HEADER = "SVC-API-KEY"

STRING = {"type": "string"}
UUID = {"type": "string", "format": "uuid"}
DATE_TIME = {"type": "string", "format": "date-time"}
ANY = {}  # JSON Schema 2020-12: any value


def _nullable(schema: dict) -> dict:
    return {"oneOf": [schema, {"type": "null"}]}


def _array(items: dict, **extra) -> dict:
    return {"type": "array", "items": items, **extra}


def _object(properties: dict, required: tuple = (), **extra) -> dict:
    schema: dict = {"type": "object", "properties": properties, **extra}
    if required:
        schema["required"] = list(required)
    return schema


def _described(schema: dict, description: str) -> dict:
    return {**schema, "description": description}


def components(settings: Settings) -> dict:
    return {
        "securitySchemes": {"apiKey": {
            "type": "apiKey", "in": "header", "name": API_KEY_HEADER,
            "description": "An application's API key (`vg_…`), shown once when it is issued.",
        }},
        "schemas": {**_common_schemas(), **_token_schemas(settings),
                    **_application_schemas(), **_pages("Token", "Application")},
        "parameters": _parameters(settings),
        "responses": _problem_responses(),
    }


def _common_schemas() -> dict:
    return {
        "Problem": _object({
            "type": {"type": "string", "format": "uri",
                     "description": "Identifies the kind of problem."},
            "title": _described(STRING, "The HTTP status phrase."),
            "status": {"type": "integer", "description": "The HTTP status code."},
            "detail": _described(STRING, "What went wrong; never echoes submitted values."),
            "errors": _described(
                {"type": "object", "additionalProperties": _array(STRING)},
                "Validation messages by field (`a.b` for nested fields)."),
        }, ("type", "title", "status", "detail"),
            description="An RFC 9457 (formerly 7807) problem detail."),
        "Pagination": _object({
            "page_size": {"type": "integer", "minimum": 1},
            "next": _described(_nullable(STRING),
                               "Cursor of the next page (pass it as `start`); null on the last."),
        }, ("page_size", "next")),
        "Status": _object({"status": STRING}, ("status",)),
    }


_CONTAINER = {"type": "string", "pattern": "^/([A-Za-z0-9_-]+/)*$",
              "description": "A path such as `/pci/high/`; stored lower-case."}
_EXPIRES_AT_INPUT = _described(
    STRING, "A future time: ISO 8601, `M/D/YYYY h:mm:ss AM|PM +hh:mm` (UTC without offset) "
            "or `M/D/YYYY` (midnight UTC).")
_EXPRESSION = {"type": "string", "maxLength": MAX_EXPRESSION}
_METADATA_VALUE = {"type": "string", "maxLength": MAX_METADATA_VALUE}


def _metadata(settings: Settings, value: dict) -> dict:
    return {"type": "object", "maxProperties": settings.max_metadata_entries,
            "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY},
            "additionalProperties": value}


_DATA_RULES = (
    "Validated by type: `card` takes `{number, expiration_month?, expiration_year?, cvc?}` "
    "(13 to 19 digits passing the Luhn check, month 1 to 12, four-digit year, 3 or 4 digit cvc "
    "as a string); `bank` takes `{routing_number, account_number}` (a valid nine-digit ABA "
    "routing number, up to 17 digits); `card_number`, `us_bank_account_number`, "
    "`us_bank_routing_number`, `social_security_number` and `employer_id_number` take one "
    "string of that kind; `token` takes anything.")
_CARD_EXAMPLE = {
    "type": "card",
    "data": {"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030,
             "cvc": "123"},
    "metadata": {"customer": "c-1001"},
    "deduplicate_token": True,
}


def _token_fields(settings: Settings) -> dict:
    """The writable fields, as Create Token takes them (spec §4.1)."""
    return {
        "id": _described(STRING, f"The id ({TOKEN_ID_MIN_LENGTH} to {TOKEN_ID_MAX_LENGTH} "
                                 "characters), or an expression giving it; a UUID if omitted. "
                                 "Never put sensitive data in an id."),
        "type": {"type": "string", "enum": sorted(TOKEN_TYPES)},
        "data": _described(ANY, "The sensitive value: object, array or primitive, at most "
                                f"{settings.max_data_bytes} bytes as JSON. {_DATA_RULES}"),
        "mask": _described(ANY, "Mask expression or structure; the type's default if omitted."),
        "containers": _array(_CONTAINER, maxItems=settings.max_containers,
                             description="The type's default containers if omitted."),
        "metadata": _described(_metadata(settings, _METADATA_VALUE),
                               "Non-sensitive strings, filterable exactly and case-insensitively."),
        "search_indexes": _array(_EXPRESSION, maxItems=settings.max_search_indexes),
        "fingerprint_expression": {**_EXPRESSION, "default": DEFAULT_FINGERPRINT_EXPRESSION},
        "deduplicate_token": {"type": "boolean"},
        "expires_at": _EXPIRES_AT_INPUT,
    }


_DEDUPLICATED = (
    "The existing token `deduplicate_token` matched (same type and fingerprint), with "
    "`_extras.deduplicated`: shown per the caller's access rules, or cut down to "
    + ", ".join(f"`{name}`" for name in SUMMARY_FIELDS) + " when the caller may not read it.")


def _token_schemas(settings: Settings) -> dict:
    fields = _token_fields(settings)
    patch = {name: schema for name, schema in fields.items() if name not in ("id", "type")}
    token = {
        "id": STRING, "tenant_id": UUID, "type": STRING,
        "data": _described(ANY, "Revealed, masked or omitted per the caller's access rules."),
        "mask": ANY,
        "fingerprint": STRING, "fingerprint_expression": STRING,
        "containers": _array(STRING), "metadata": fields["metadata"],
        "search_indexes": _array(STRING),
        "created_by": UUID, "created_at": DATE_TIME,
        "modified_by": UUID, "modified_at": DATE_TIME,
        "expires_at": _described(DATE_TIME, "ISO 8601 with offset."),
        "_extras": _object({"deduplicated": {"type": "boolean"}}),
    }
    child = {name: token[name] for name in (*CHILD_FIELDS, "_extras")}
    summary = (*SUMMARY_FIELDS, "_extras")
    return {
        "Token": _object(token, ("id", "tenant_id", "type", "containers", "created_by",
                                 "created_at"),
                         description="A token (spec §2.1). Reads show the fields the caller "
                                     "may see."),
        "DeduplicatedToken": _object(token, summary, description=_DEDUPLICATED),
        "ChildToken": _object(child, ("id", "tenant_id", "type", "containers", "created_by",
                                      "created_at", "metadata"),
                              description="A created child token (spec §4.8): never `data`, "
                                          "`mask` or `search_indexes`."),
        "DeduplicatedChildToken": _object(child, summary, description=_DEDUPLICATED
                                          + " In the child shape: never `data`, `mask` or "
                                            "`search_indexes`."),
        "CreateToken": _object(fields, ("type", "data"), additionalProperties=False,
                               examples=[_CARD_EXAMPLE]),
        "UpdateToken": _object(
            {**patch, "data": _described(ANY, "Merged (RFC 7386); null removes a key."),
             "mask": _described(ANY, "Merged (RFC 7386)."),
             "expires_at": _described(_nullable(STRING), "As on create; null: never expires."),
             "metadata": _described(_metadata(settings, _nullable(_METADATA_VALUE)),
                                    "Merged (RFC 7386); null removes a key.")},
            additionalProperties=False,
            description="A JSON merge patch: data, mask and metadata are merged, the rest "
                        "replaced; validation runs on the merged token."),
        "Association": _object({"parent_id": STRING, "child_id": STRING,
                                "created_at": _described(DATE_TIME, "When the link was made.")},
                               ("parent_id", "child_id", "created_at"),
                               description="A parent → child link."),
        "TokenGraph": _object({
            "root": _described(STRING, "The token asked for."),
            "depth": {"type": "integer", "minimum": MIN_DEPTH, "maximum": MAX_DEPTH},
            "direction": {"type": "string", "enum": list(DIRECTIONS)},
            "truncated": _described(
                {"type": "boolean"},
                f"True when a bound cut the answer: at most {MAX_NODES} tokens, and at most "
                f"{MAX_LINKS_PER_LEVEL} links read per level."),
            "nodes": _described(_array(ref("Token")),
                                "The root first, then breadth first; each token shown per the "
                                "caller's access rules. Tokens it may not read are absent, and "
                                "so is whatever is reachable only through them."),
            "edges": _described(
                _array(_object({"parent_id": STRING, "child_id": STRING},
                               ("parent_id", "child_id"))),
                "The links among the tokens in `nodes`, each once."),
        }, ("root", "depth", "direction", "truncated", "nodes", "edges"),
            description="Tokens linked to a token within `depth` links, and the links among "
                        "them."),
    }


def _application_schemas() -> dict:
    rule = _object({
        "description": {"type": "string", "maxLength": MAX_DESCRIPTION, "default": ""},
        "priority": _described({"type": "integer", "minimum": 0, "maximum": MAX_PRIORITY,
                                "default": 0}, "Lower is tried first."),
        "container": _described(_CONTAINER, "Covers this container and those below it."),
        "transform": {"type": "string", "enum": list(TRANSFORMS)},
        "permissions": _array({"type": "string", "enum": list(TOKEN_PERMISSIONS)}, minItems=1),
    }, ("container", "transform", "permissions"), additionalProperties=False)
    writable = {
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME},
        "permissions": _array({"type": "string", "enum": list(ALL_PERMISSIONS)}, default=[]),
        "rules": _array(ref("AccessRule"), maxItems=MAX_RULES, default=[],
                        description="Without rules, the token permissions apply on `/` with "
                                    "`mask`; revealing data always takes a `reveal` rule."),
    }
    key = _object({"id": UUID, "application_id": UUID, "created_at": DATE_TIME},
                  ("id", "application_id", "created_at"))
    issued = _object(
        {"key": _described(STRING, "The API key itself: shown this once, never again.")},
        ("key",))
    return {
        "AccessRule": rule,
        "ApplicationInput": _object(writable, ("name",), additionalProperties=False,
                                    description="Grants no more than the calling application "
                                                "holds. A replace (PUT) sets every field: "
                                                "omitted lists become empty."),
        "Application": _object({"id": UUID, "tenant_id": UUID, **writable,
                                "created_by": _nullable(UUID), "created_at": DATE_TIME,
                                "modified_at": DATE_TIME},
                               ("id", "tenant_id", "name", "permissions", "rules", "created_at")),
        "NewApplication": {"allOf": [ref("Application"), issued]},
        "OwnApplication": {"allOf": [ref("Application"), _object(
            {"key_id": _described(UUID, "The key this request was made with.")}, ("key_id",))]},
        "ApiKey": key,
        "IssuedApiKey": {"allOf": [ref("ApiKey"), issued]},
        "ApiKeyList": _object({"data": _array(ref("ApiKey"))}, ("data",)),
    }


def _pages(*items: str) -> dict:
    return {f"{item}Page": _object({"pagination": ref("Pagination"), "data": _array(ref(item))},
                                   ("pagination", "data"))
            for item in items}


def _parameters(settings: Settings) -> dict:
    return {
        "PageSize": query("size", "Items per page.", {
            "type": "integer", "minimum": 1, "maximum": settings.page_size_max,
            "default": settings.page_size_default}),
        "PageStart": query("start", "The `pagination.next` cursor of the previous page.", STRING),
        "TokenIds": query("id", "Only these token ids.", STRING, repeatable=True),
        "TokenTypes": query("type", "Only these token types.", STRING, repeatable=True),
        "GraphDepth": query("depth", "Links to follow from the token.", {
            "type": "integer", "minimum": MIN_DEPTH, "maximum": MAX_DEPTH,
            "default": DEFAULT_DEPTH}),
        "GraphDirection": query(
            "direction", "`children`: parent → child; `parents`: child → parent; `both`: "
                         "links followed either way.",
            {"type": "string", "enum": list(DIRECTIONS), "default": DEFAULT_DIRECTION}),
    }


_PROBLEM_DESCRIPTIONS = {
    400: "The request is invalid; `errors` names the fields.",
    401: "The API key is missing, unknown or revoked.",
    403: "The application lacks the permission for this operation, or the access the request "
         "needs (`detail` says which: a write's containers, a reveal rule an update needs, an "
         "application holding access the caller lacks).",
    404: "No such resource, or one the caller may not see (the same answer).",
    409: "The id is taken.",
    413: "The request body is too large.",
    415: "The request body has the wrong Content-Type.",
    503: "Neo4j is unavailable; retry after `Retry-After` seconds.",
}


def _problem_responses() -> dict:
    out = {}
    for status, name in PROBLEM_RESPONSES.items():
        response = {"description": f"{status_phrase(status)}: {_PROBLEM_DESCRIPTIONS[status]}",
                    "content": content(ref("Problem"), PROBLEM_JSON)}
        if status == 503:
            response["headers"] = {"Retry-After": {"schema": {"type": "integer"}}}
        out[name] = response
    return out
