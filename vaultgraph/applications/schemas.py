"""Schemas of the management API, compiled once at import: request bodies (loaded by the
handlers) and response bodies (dumped by api/endpoints.py); /openapi.json describes both.

Messages name the rule, never the submitted value.
"""

from __future__ import annotations

import unicodedata

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validate

from ..auth.permissions import ALL_PERMISSIONS, TOKEN_PERMISSIONS
from ..auth.rules import TRANSFORMS, Rule
from ..tokens.fields import normalize_container
from ..tokens.schemas import CONTAINER_SCHEMA, DATE_TIME, UUID
from .model import ApplicationDraft

MAX_RULES = 50
MAX_NAME = 200
MAX_DESCRIPTION = 200
MAX_PRIORITY = 2**31 - 1


def name_rules(max_length: int = MAX_NAME) -> list[validate.Validator]:
    """A name (an application's, a tenant's, a proxy's): 1 to `max_length` (MAX_NAME)
    characters, not only white space, printable characters only (`printable`). A tenant's name
    leaves room for its administrator application's name."""
    return [validate.Length(min=1, max=max_length),
            validate.Regexp(r"\S", error="must not be blank"), printable]


def printable(name: str) -> None:
    """Only printable characters: a name is printed by the command line, listed, and logged,
    and a control character would end or rewrite the line a terminal or a log shows.
    `str.isprintable` refuses every space but the ASCII one (a no-break space, an ideographic
    space), which names hold: those are kept, every other character it refuses is not."""
    if not name.isprintable() and not all(
            c.isprintable() or unicodedata.category(c) == "Zs" for c in name):
        raise ValidationError("must hold printable characters only")


class _Container(fields.String):
    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return normalize_container(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class _Priority(fields.Integer):
    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class RuleSchema(Schema):
    class Meta:
        unknown = RAISE

    description = fields.String(load_default="", validate=validate.Length(max=MAX_DESCRIPTION),
                                metadata={"default": ""})
    priority = _Priority(load_default=0, strict=True,
                         validate=validate.Range(min=0, max=MAX_PRIORITY),
                         metadata={"default": 0, "description": "Lower is tried first."})
    container = _Container(required=True, metadata={
        **CONTAINER_SCHEMA, "description": "Covers this container and those below it."})
    transform = fields.String(required=True, validate=validate.OneOf(TRANSFORMS))
    permissions = fields.List(fields.String(validate=validate.OneOf(TOKEN_PERMISSIONS)),
                              required=True, validate=validate.Length(min=1))

    @post_load
    def _rule(self, data, **_) -> Rule:
        return Rule(container=data["container"], transform=data["transform"],
                    permissions=frozenset(data["permissions"]), priority=data["priority"],
                    description=data["description"])


class ApplicationSchema(Schema):
    """Grants no more than the calling application holds. A replace (PUT) sets every field:
    omitted lists become empty."""

    class Meta:
        unknown = RAISE

    name = fields.String(required=True, validate=name_rules())
    permissions = fields.List(fields.String(validate=validate.OneOf(ALL_PERMISSIONS)),
                              load_default=list, metadata={"default": []})
    rules = fields.List(fields.Nested(RuleSchema), load_default=list,
                        validate=validate.Length(max=MAX_RULES), metadata={
                            "default": [],
                            "description": "Without rules, the token permissions apply on `/` "
                                           "with `mask`; revealing data always takes a `reveal` "
                                           "rule."})

    @post_load
    def _draft(self, data, **_) -> ApplicationDraft:
        return ApplicationDraft(name=data["name"],
                                permissions=tuple(sorted(set(data["permissions"]))),
                                rules=tuple(data["rules"]))


# -- response bodies -------------------------------------------------------------------------------

class AccessRuleSchema(Schema):
    """An access rule as answered: every field set."""

    description = fields.String(required=True)
    priority = fields.Integer(required=True)
    container = fields.String(required=True)
    transform = fields.String(required=True, metadata={"enum": list(TRANSFORMS)})
    permissions = fields.List(fields.String(metadata={"enum": list(TOKEN_PERMISSIONS)}),
                              required=True)


class ApplicationBodySchema(Schema):
    """An application, its permissions and access rules."""

    id = fields.String(required=True, metadata=UUID)
    tenant_id = fields.String(required=True, metadata=UUID)
    name = fields.String(required=True)
    permissions = fields.List(fields.String(metadata={"enum": list(ALL_PERMISSIONS)}),
                              required=True)
    rules = fields.List(fields.Nested(AccessRuleSchema), required=True)
    created_at = fields.String(required=True, metadata=DATE_TIME)
    created_by = fields.String(allow_none=True, metadata=UUID)
    modified_at = fields.String(metadata=DATE_TIME)


class NewApplicationSchema(ApplicationBodySchema):
    """A created application, with its first API key (shown this once)."""

    key = fields.String(metadata={
        "description": "The API key itself: shown this once, never again (absent from the "
                       "replay of the request under its `Idempotency-Key`)."})


class OwnApplicationSchema(ApplicationBodySchema):
    """The calling application, and the id of the key the request was made with."""

    key_id = fields.String(required=True, metadata={
        **UUID, "description": "The key this request was made with."})


class ApiKeySchema(Schema):
    id = fields.String(required=True, metadata=UUID)
    application_id = fields.String(required=True, metadata=UUID)
    created_at = fields.String(required=True, metadata=DATE_TIME)


class IssuedApiKeySchema(ApiKeySchema):
    key = fields.String(metadata={
        "description": "The API key itself: shown this once, never again (absent from the "
                       "replay of the request under its `Idempotency-Key`)."})


class ApiKeyListSchema(Schema):
    data = fields.List(fields.Nested(ApiKeySchema), required=True)
