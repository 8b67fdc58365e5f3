"""Schemas of the webhook management API: request bodies (loaded by the handlers) and answers
(dumped by api/endpoints.py); /openapi.json describes both. Messages name the rule, never the
submitted value."""

from __future__ import annotations

from marshmallow import RAISE, Schema, ValidationError, fields, validate

from ..tokens.fields import normalize_container
from ..tokens.schemas import CONTAINER_SCHEMA, DATE_TIME, UUID
from . import ALL, EVENT_TYPES, STATUSES

MAX_URL = 2048
MAX_DESCRIPTION = 200
MAX_CONTAINERS = 20
EVENT_NAMES = (*EVENT_TYPES, ALL)


class _Container(fields.String):
    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return normalize_container(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


def _events(required: bool) -> fields.List:
    return fields.List(
        fields.String(validate=validate.OneOf(EVENT_NAMES, error="is not a known event type")),
        required=required, validate=validate.Length(min=1, max=len(EVENT_NAMES)),
        metadata={"description": "Event types to receive; `*` for all."})


def _containers(extra: dict | None = None, **kwargs) -> fields.List:
    return fields.List(_Container(metadata=CONTAINER_SCHEMA),
                       validate=validate.Length(min=1, max=MAX_CONTAINERS), metadata={
                           "description": "Only events of tokens in these containers (and "
                                          "below); for a link, both ends. Each must lie "
                                          "within the caller's `token:read` containers.",
                           **(extra or {})},
                       **kwargs)


_URL = {"description": "Where events are POSTed: `https` (`http` only where the service "
                       "allows it); addresses in private, loopback, link-local and other "
                       "special ranges are refused.", "format": "uri"}


class CreateWebhookSchema(Schema):
    class Meta:
        unknown = RAISE

    url = fields.String(required=True, validate=validate.Length(min=1, max=MAX_URL),
                        metadata=_URL)
    events = _events(required=True)
    containers = _containers({"default": ["/"]}, load_default=lambda: ["/"])
    description = fields.String(load_default=None, allow_none=True,
                                validate=validate.Length(max=MAX_DESCRIPTION))


class UpdateWebhookSchema(Schema):
    """A JSON merge patch: only the fields given change."""

    class Meta:
        unknown = RAISE

    url = fields.String(validate=validate.Length(min=1, max=MAX_URL), metadata=_URL)
    events = _events(required=False)
    containers = _containers()
    description = fields.String(allow_none=True, validate=validate.Length(max=MAX_DESCRIPTION))
    status = fields.String(validate=validate.OneOf(STATUSES))


class WebhookSchema(Schema):
    id = fields.String(required=True, metadata=UUID)
    url = fields.String(required=True)
    events = fields.List(fields.String(), required=True)
    containers = fields.List(fields.String(), required=True)
    description = fields.String(allow_none=True)
    status = fields.String(required=True, metadata={"enum": list(STATUSES)})
    disabled_reason = fields.String(allow_none=True, metadata={
        "description": "`failing`: disabled by the service after failing every delivery for "
                       "the configured time (5 days by default); null otherwise."})
    created_at = fields.String(required=True, metadata=DATE_TIME)
    modified_at = fields.String(allow_none=True, metadata=DATE_TIME)


class NewWebhookSchema(WebhookSchema):
    secret = fields.String(required=True, metadata={
        "description": "`whsec_` and the base64 of 32 random bytes: shown in this answer only "
                       "(and in its replay under the request's `Idempotency-Key`)."})


class SecretSchema(Schema):
    secret = fields.String(required=True, metadata={
        "description": "The new secret, shown in this answer only (and in its replay under the "
                       "request's `Idempotency-Key`); the previous one also signs (a second "
                       "`v1,` signature) for 24 hours."})
    previous_secret_expires_at = fields.String(required=True, metadata=DATE_TIME)


class TestEventSchema(Schema):
    event_id = fields.String(required=True, metadata=UUID)


class RetriedDeliverySchema(Schema):
    event_id = fields.String(required=True, metadata=UUID)
    state = fields.String(required=True, metadata={
        "enum": ["pending", "paused"],
        "description": "`pending`: due now; `paused`: held until the webhook is enabled."})


class AttemptSchema(Schema):
    id = fields.String(required=True, metadata=UUID)
    event_id = fields.String(required=True, metadata={
        **UUID, "description": "The event's id, sent as `webhook-id`."})
    type = fields.String(required=True)
    attempt = fields.Integer(required=True, metadata={"minimum": 1})
    outcome = fields.String(required=True, metadata={
        "enum": ["success", "status", "redirect", "timeout", "unreachable", "refused"]})
    status = fields.Integer(allow_none=True, metadata={
        "description": "The endpoint's HTTP status; null when none came."})
    error = fields.String(allow_none=True)
    duration_ms = fields.Float(required=True)
    response = fields.String(allow_none=True, metadata={
        "description": "The first kilobyte of the endpoint's answer."})
    at = fields.String(required=True, metadata=DATE_TIME)
    next_at = fields.String(allow_none=True, metadata={
        **DATE_TIME, "description": "When the event is tried again; null: delivered, or "
                                    "failed for good after the last attempt."})
