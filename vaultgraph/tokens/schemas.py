"""Request schemas for tokens, compiled once at import.

Messages name the rule, never the submitted value (token data must not reach error bodies).
"""

from __future__ import annotations

import unicodedata

from marshmallow import RAISE, Schema, ValidationError, fields, validates

from ..expressions import ExpressionError, validate_expression, validate_mask
from .fields import normalize_container, validate_token_id

MAX_METADATA_KEY = 128
MAX_METADATA_VALUE = 1024
MAX_EXPRESSION = 4096
# JSON nesting of `data`: deep enough for any real record, shallow enough that encoding (orjson
# stops at 255 levels) and merge patching (recursive) never hit a limit mid-request.
MAX_DATA_DEPTH = 64


def _depth(value) -> int:
    """Nesting depth of a JSON value (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest


def _data(value) -> None:
    if _depth(value) > MAX_DATA_DEPTH:
        raise ValidationError(f"must be nested at most {MAX_DATA_DEPTH} levels deep")


def _check(fn, value):
    try:
        return fn(value)
    except (ValueError, ExpressionError) as exc:
        raise ValidationError(str(exc)) from None


class _TokenFields(Schema):
    class Meta:
        unknown = RAISE

    mask = fields.Raw(allow_none=True)
    containers = fields.List(fields.String(), allow_none=True)
    metadata = fields.Dict(keys=fields.String(), values=fields.String(allow_none=True),
                           allow_none=True)
    search_indexes = fields.List(fields.String(), allow_none=True)
    fingerprint_expression = fields.String(allow_none=True)
    deduplicate_token = fields.Boolean(allow_none=True)
    expires_at = fields.String(allow_none=True)

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
            if not key or len(key) > MAX_METADATA_KEY:
                raise ValidationError(f"keys must be 1 to {MAX_METADATA_KEY} characters")
            if any(unicodedata.category(ch) == "Cc" for ch in key):
                # The filter index joins key and value with U+001F: keys must not hold it.
                raise ValidationError("keys must not contain control characters")
            if item is not None and len(item) > MAX_METADATA_VALUE:
                raise ValidationError(f"values must be at most {MAX_METADATA_VALUE} characters")

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
    id = fields.String(allow_none=True)
    type = fields.String(required=True)
    data = fields.Raw(required=True, allow_none=False, validate=_data)

    @validates("id")
    def _id(self, value, **_):
        if value is None:
            return
        if "{{" in value or "{%" in value:
            _check(validate_expression, value)
        else:
            _check(validate_token_id, value)


class UpdateTokenSchema(_TokenFields):
    data = fields.Raw(allow_none=False, validate=_data)


CREATE_TOKEN = CreateTokenSchema()
UPDATE_TOKEN = UpdateTokenSchema()
