"""Token schemas: the request bodies (loaded by the handlers through api/loading.py) and the
response bodies (dumped by api/endpoints.py). Both are what /openapi.json describes.

Messages name the rule, never the submitted value (token data must not reach error bodies).
Field `metadata` feeds the document: OpenAPI keywords, and `limits` ({keyword: Settings field})
for bounds the running Settings decide (api/openapi.py resolves them; a description may name
them as `{field}`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from marshmallow import RAISE, Schema, ValidationError, fields, validates

from ..expressions import (
    DEFAULT_FINGERPRINT_EXPRESSION,
    MAX_EXPRESSION_LENGTH,
    ExpressionError,
    validate_expression,
    validate_mask,
)
from .fields import (
    _EXPIRES_AT_MAX_LENGTH,
    CONTAINER_MAX_LENGTH,
    CONTAINER_MAX_SEGMENTS,
    TOKEN_ID_MAX_LENGTH,
    TOKEN_ID_MIN_LENGTH,
    has_control_character,
    normalize_container,
    validate_token_id,
)
from .types import TOKEN_TYPES
from .view import CHILD_FIELDS, SUMMARY_FIELDS

MAX_METADATA_KEY = 128
MAX_METADATA_VALUE = 1024
MAX_EXPRESSION = MAX_EXPRESSION_LENGTH
# JSON nesting of `data`: deep enough for any real record, shallow enough that encoding (orjson
# stops at 255 levels) and merge patching (recursive) never hit a limit mid-request.
MAX_DATA_DEPTH = 64


def _nested_deeper_than(value, limit: int) -> bool:
    """Whether a JSON value nests more than `limit` levels (a scalar is 0), without recursion:
    level by level, stopping past the limit."""
    level = [value]
    for _ in range(limit + 1):
        below = []
        for item in level:
            if isinstance(item, dict):
                below.extend(item.values())
            elif isinstance(item, list):
                below.extend(item)
        if not below:
            return False
        level = below
    return True


def _data(value) -> None:
    if _nested_deeper_than(value, MAX_DATA_DEPTH):
        raise ValidationError(f"must be nested at most {MAX_DATA_DEPTH} levels deep")


def _check(fn, value):
    try:
        return fn(value)
    except (ValueError, ExpressionError) as exc:
        raise ValidationError(str(exc)) from None


# -- what the document says of each field (the validators below enforce it) ----------------------

# C0 and C1 controls (Unicode category Cc), as a JSON Schema character class.
_NO_CONTROLS = "\\u0000-\\u001F\\u007F-\\u009F"
TOKEN_ID_PATTERN = f"^[^#/\\\\+?\\[\\]|&=%<>{{}}^\\s{_NO_CONTROLS}]*$"
TOKEN_ID_RULE = (
    f"{TOKEN_ID_MIN_LENGTH} to {TOKEN_ID_MAX_LENGTH} characters; none of "
    "`# / \\ + ? [ ] | & = % < > { } ^`, no whitespace, control, format, private-use or "
    "unassigned characters.")
# A literal token id, as ids are accepted in bodies and as they can exist in paths.
TOKEN_ID_SCHEMA = {"type": "string", "minLength": TOKEN_ID_MIN_LENGTH,
                   "maxLength": TOKEN_ID_MAX_LENGTH, "pattern": TOKEN_ID_PATTERN}
CONTAINER_SCHEMA = {
    "type": "string", "maxLength": CONTAINER_MAX_LENGTH,
    "pattern": f"^/([A-Za-z0-9_-]+/){{0,{CONTAINER_MAX_SEGMENTS}}}$",
    "description": "A path such as `/pci/high/`, at most "
                   f"{CONTAINER_MAX_SEGMENTS} segments; stored lower-case."}
_EXPIRES_AT = (
    "A future time: ISO 8601, `M/D/YYYY h:mm:ss AM|PM +hh:mm` (UTC without offset) or "
    "`M/D/YYYY` (midnight UTC).")
_DATA_RULES = (
    "Validated by type: `card` takes `{number, expiration_month?, expiration_year?, cvc?}` "
    "(13 to 19 digits passing the Luhn check, month 1 to 12, four-digit year, 3 or 4 digit cvc "
    "as a string); `bank` takes `{routing_number, account_number}` (a valid nine-digit ABA "
    "routing number, up to 17 digits); `card_number`, `us_bank_account_number`, "
    "`us_bank_routing_number`, `social_security_number` and `employer_id_number` take one "
    "string of that kind; `token` takes anything.")
_DATA_LIMITS = {"limits": {"x-maxBytes": "max_data_bytes"}, "not": {"type": "null"}}
CARD_EXAMPLE = {
    "type": "card",
    "data": {"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030,
             "cvc": "123"},
    "metadata": {"customer": "c-1001"},
    "deduplicate_token": True,
}


def _expression(allow_none: bool = False, **metadata) -> fields.String:
    return fields.String(allow_none=allow_none,
                         metadata={"maxLength": MAX_EXPRESSION, **metadata})


class StringMap(fields.Dict):
    """A JSON object of strings whose errors name the entry as the caller wrote it: a value
    that is not a string is `metadata.a`, where marshmallow's Dict says `metadata.a.value`."""

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return super()._deserialize(value, attr, data, **kwargs)
        except ValidationError as error:
            if not isinstance(error.messages, dict):
                raise
            by_entry = {key: [*parts.get("key", ()), *parts.get("value", ())]
                        for key, parts in error.messages.items()}
            raise ValidationError(by_entry, valid_data=error.valid_data) from None


def metadata_problem(key: str, value: str | None) -> str | None:
    """What breaks the metadata rules in one entry, a body's or a filter's, or None."""
    if not key or len(key) > MAX_METADATA_KEY:
        return f"keys must be 1 to {MAX_METADATA_KEY} characters"
    if has_control_character(key):
        # The filter index joins key and value with U+001F: keys must not hold it.
        return "keys must not contain control characters"
    if value is not None and len(value) > MAX_METADATA_VALUE:
        return f"values must be at most {MAX_METADATA_VALUE} characters"
    return None


def _metadata_field(description: str) -> fields.Dict:
    return StringMap(
        keys=fields.String(), allow_none=True,
        values=fields.String(allow_none=True, metadata={"maxLength": MAX_METADATA_VALUE}),
        metadata={"description": description, "limits": {"maxProperties": "max_metadata_entries"},
                  "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY,
                                    "pattern": f"^[^{_NO_CONTROLS}]*$"}})


class _TokenFields(Schema):
    class Meta:
        unknown = RAISE

    mask = fields.Raw(allow_none=True, metadata={
        "description": "Mask expression or structure; the type's default if omitted."})
    containers = fields.List(
        fields.String(metadata=CONTAINER_SCHEMA), allow_none=True,
        metadata={"description": "The type's default containers if omitted.",
                  "limits": {"maxItems": "max_containers"}})
    metadata = _metadata_field(
        "Non-sensitive strings, filterable exactly and case-insensitively.")
    search_indexes = fields.List(_expression(), allow_none=True,
                                 metadata={"limits": {"maxItems": "max_search_indexes"}})
    fingerprint_expression = _expression(allow_none=True,
                                         default=DEFAULT_FINGERPRINT_EXPRESSION)
    deduplicate_token = fields.Boolean(allow_none=True)
    expires_at = fields.String(allow_none=True, metadata={
        "description": _EXPIRES_AT, "minLength": 1, "maxLength": _EXPIRES_AT_MAX_LENGTH})

    @validates("mask")
    def _mask(self, value, **_):
        if value is not None:
            _check(validate_mask, value)

    @validates("containers")
    def _containers(self, value, **_):
        for path in value or ():
            _check(normalize_container, path)

    @validates("metadata")
    def _metadata(self, value, **_):
        for key, item in (value or {}).items():
            problem = metadata_problem(key, item)
            if problem is not None:
                raise ValidationError(problem)

    @validates("search_indexes")
    def _search_indexes(self, value, **_):
        for expression in value or ():
            if len(expression) > MAX_EXPRESSION:
                raise ValidationError("expression is too long")
            _check(validate_expression, expression)

    @validates("fingerprint_expression")
    def _fingerprint_expression(self, value, **_):
        if value is not None:
            _check(validate_expression, value)


class CreateTokenSchema(_TokenFields):
    id = fields.String(allow_none=True, metadata={
        "description": "The id, or an expression (`{{ … }}`, `{% … %}`) giving it; a UUID if "
                       f"omitted. A literal id has {TOKEN_ID_RULE} Never put sensitive data "
                       "in an id.",
        "anyOf": [TOKEN_ID_SCHEMA, {"type": "string", "maxLength": MAX_EXPRESSION,
                                    "pattern": "\\{[{%]"}, {"type": "null"}]})
    type = fields.String(required=True, metadata={"enum": sorted(TOKEN_TYPES)})
    data = fields.Raw(required=True, allow_none=False, validate=_data, metadata={
        "description": "The sensitive value: object, array or primitive, at most "
                       f"{{max_data_bytes}} bytes as JSON, nested at most {MAX_DATA_DEPTH} "
                       f"levels. {_DATA_RULES}", **_DATA_LIMITS})

    @validates("id")
    def _id(self, value, **_):
        if value is None:
            return
        if "{{" in value or "{%" in value:
            _check(validate_expression, value)
        else:
            _check(validate_token_id, value)


class UpdateTokenSchema(_TokenFields):
    data = fields.Raw(allow_none=False, validate=_data, metadata={
        "description": "Merged (RFC 7386); null removes a key. At most {max_data_bytes} bytes "
                       "as JSON once merged.", **_DATA_LIMITS})
    mask = fields.Raw(allow_none=True, metadata={"description": "Merged (RFC 7386)."})
    metadata = _metadata_field("Merged (RFC 7386); null removes a key.")
    expires_at = fields.String(allow_none=True, metadata={
        "description": "As on create; null: never expires.", "minLength": 1,
        "maxLength": _EXPIRES_AT_MAX_LENGTH})


# -- response bodies (dumped by the endpoint that answers them) ----------------------------------

UUID = {"format": "uuid"}
DATE_TIME = {"format": "date-time"}


class ExtrasSchema(Schema):
    deduplicated = fields.Boolean()
    merged = fields.Boolean(metadata={
        "description": "On an update that matched another token: false when the match is not "
                       "readable by the caller, so the update was applied in place instead."})


class TokenSchema(Schema):
    """A token. Reads show the fields the caller may see; the order is the view's."""

    id = fields.String(required=True)
    tenant_id = fields.String(required=True, metadata=UUID)
    type = fields.String(required=True)
    data = fields.Raw(metadata={
        "description": "Revealed, masked or omitted per the caller's access rules."})
    mask = fields.Raw()
    fingerprint = fields.String()
    fingerprint_expression = fields.String()
    containers = fields.List(fields.String(), required=True)
    metadata = fields.Dict(keys=fields.String(), values=fields.String())
    search_indexes = fields.List(fields.String())
    created_by = fields.String(required=True, metadata=UUID)
    created_at = fields.String(required=True, metadata=DATE_TIME)
    modified_by = fields.String(metadata=UUID)
    modified_at = fields.String(metadata=DATE_TIME)
    expires_at = fields.String(metadata={**DATE_TIME, "description": "ISO 8601 with offset."})
    _extras = fields.Nested(ExtrasSchema)


def _shape(name: str, doc: str, names: Iterable[str], required: Iterable[str]) -> type[Schema]:
    """A schema of some of the token fields, `required` marked (for the document only)."""
    required = set(required)
    chosen = {}
    for field_name in names:
        field = copy.deepcopy(TokenSchema._declared_fields[field_name])
        field.required = field_name in required
        chosen[field_name] = field
    schema = Schema.from_dict(chosen, name=name)
    schema.__doc__ = doc
    return schema


_DEDUPLICATED = (
    "The existing token `deduplicate_token` matched (same type and fingerprint), with "
    "`_extras.deduplicated`: shown per the caller's access rules, or cut down to "
    + ", ".join(f"`{name}`" for name in SUMMARY_FIELDS) + " when the caller may not read it.")
_TOKEN_FIELDS = tuple(TokenSchema._declared_fields)
_CHILD_FIELDS = (*CHILD_FIELDS, "_extras")
_SUMMARY_FIELDS = (*SUMMARY_FIELDS, "_extras")

DeduplicatedTokenSchema = _shape("DeduplicatedTokenSchema", _DEDUPLICATED, _TOKEN_FIELDS,
                                 _SUMMARY_FIELDS)
ChildTokenSchema = _shape(
    "ChildTokenSchema", "A created child token: never `data`, `mask` or "
                        "`search_indexes`.",
    _CHILD_FIELDS, ("id", "tenant_id", "type", "containers", "created_by", "created_at",
                    "metadata"))
DeduplicatedChildTokenSchema = _shape(
    "DeduplicatedChildTokenSchema",
    _DEDUPLICATED + " In the child shape: never `data`, `mask` or `search_indexes`.",
    _CHILD_FIELDS, _SUMMARY_FIELDS)
