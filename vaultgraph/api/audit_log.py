"""GET /logs: the tenant's audit trail, newest first (docs/audit.md)."""

from __future__ import annotations

import uuid
from datetime import datetime

from aiohttp import web
from marshmallow import Schema, fields, validate

from ..audit.event import OUTCOMES, SYSTEM
from ..audit.query import LogFilter
from ..auth.permissions import ALL_PERMISSIONS, LOG_READ
from ..errors import invalid
from ..tokens.fields import INSTANT_YEARS, utc_instant
from ..tokens.schemas import TOKEN_ID_SCHEMA
from .endpoints import Endpoints, Reply
from .filters import token_ids
from .paging import page_body, page_from_query
from .request_io import principal
from .schemas import PageQuery, page_of
from .typedefs import services_key, settings_key

endpoints = Endpoints()
TAG = "Audit"
_NULLABLE_TEXT = {"allow_none": True}


class AuditEventSchema(Schema):
    """One audit event: ids, outcome, transform, trace id and reason; never data, masks,
    metadata values, search-index values, fingerprints, keys or request bodies."""

    id = fields.String(required=True, metadata={"format": "uuid"})
    at = fields.String(required=True, metadata={"format": "date-time"})
    tenant_id = fields.String(required=True, allow_none=True)
    application_id = fields.String(required=True, allow_none=True)
    key_id = fields.String(required=True, allow_none=True)
    operation = fields.String(required=True, allow_none=True, metadata={
        "description": "The permission the route declares, e.g. `token:read`."})
    route = fields.String(required=True, allow_none=True, metadata={
        "description": "Method and route template, e.g. `GET /tokens/{id}`."})
    token_ids = fields.List(fields.String(), required=True)
    outcome = fields.String(required=True, validate=validate.OneOf(OUTCOMES))
    status = fields.Integer(required=True)
    transform = fields.String(required=True, allow_none=True)
    transform_counts = fields.String(required=True, allow_none=True, metadata={
        "description": "For lists: a JSON object counting the tokens per transform."})
    trace_id = fields.String(required=True, allow_none=True)
    client_ip = fields.String(required=True, allow_none=True)
    user_agent = fields.String(required=True, allow_none=True)
    reason = fields.String(required=True, allow_none=True, metadata={
        "description": "A short code (the problem type of a refusal), never request text."})


AuditEventPageSchema = page_of(AuditEventSchema, "AuditEventPageSchema")


class LogQuery(Schema):
    token_id = fields.String(metadata={**TOKEN_ID_SCHEMA,
                                       "description": "Events that name this token."})
    application_id = fields.String(metadata={
        "description": "An application id (a UUID), or `system` for the service's own work "
                       "(expiry sweeps).",
        "pattern": "^(system|[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                   "[0-9a-fA-F]{12})$"})
    operation = fields.String(validate=validate.OneOf(ALL_PERMISSIONS))
    outcome = fields.String(validate=validate.OneOf(OUTCOMES))
    start_date = fields.String(metadata={"format": "date-time"})
    end_date = fields.String(metadata={"format": "date-time"})


def _date(query, name: str) -> datetime | None:
    """The query's time `name` in UTC (no offset: UTC); one UTC cannot hold is refused too."""
    raw = query.get(name)
    if raw is None:
        return None
    try:
        return utc_instant(datetime.fromisoformat(raw))
    except ValueError:
        raise invalid(name, f"must be an ISO 8601 date-time {INSTANT_YEARS}") from None


def _cursor(after) -> tuple[datetime, str] | None:
    if after is None:
        return None
    try:
        at, event_id = after
        when = datetime.fromisoformat(at)
        if when.tzinfo is None:  # the service's cursors always carry the offset
            raise ValueError(at)
        return utc_instant(when), str(uuid.UUID(event_id))
    except (TypeError, ValueError):
        raise invalid("start", "is not a cursor this service issued") from None


def log_filter(query) -> LogFilter:
    token_id = next(iter(token_ids(query, "token_id")), None)
    application_id = query.get("application_id")
    if application_id is not None and application_id != SYSTEM:
        try:
            application_id = str(uuid.UUID(application_id))
        except ValueError:
            raise invalid("application_id",
                          "must be an application id (a UUID) or system") from None
    operation = query.get("operation")
    if operation is not None and operation not in ALL_PERMISSIONS:
        raise invalid("operation", "must be a permission, e.g. token:read")
    outcome = query.get("outcome")
    if outcome is not None and outcome not in OUTCOMES:
        raise invalid("outcome", "must be one of " + ", ".join(OUTCOMES))
    return LogFilter(token_id=token_id, application_id=application_id, operation=operation,
                     outcome=outcome, since=_date(query, "start_date"),
                     until=_date(query, "end_date"))


@endpoints.get(
    "/logs", operation_id="listLogs", summary="Read the audit trail", tag=TAG,
    access=(LOG_READ,), query=(LogQuery, PageQuery), errors=(400,),
    description="The calling application's tenant's events, newest first; filters are "
                "ANDed, each answered from an index.",
    replies=(Reply(200, "A page of audit events.", AuditEventPageSchema),))
async def list_logs(request: web.Request):
    page = page_from_query(request.query, request.app[settings_key], cursor_type=list)
    events, position = await request.app[services_key].audit_log.page(
        principal(request).tenant_id, log_filter(request.query), page.size,
        _cursor(page.after))
    next_cursor = [position[0].isoformat(), position[1]] if position else None
    return page_body(events, page, next_cursor)
