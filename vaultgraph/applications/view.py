"""Application and key → response body. A key's secret is never here: the handler that issues
one adds it to the body of that one response."""

from __future__ import annotations

from ..tokens.fields import format_datetime
from .model import ApiKeyInfo, Application


def application_body(app: Application) -> dict:
    out = {
        "id": app.id,
        "tenant_id": app.tenant_id,
        "name": app.name,
        "permissions": list(app.permissions),
        "rules": [rule.to_dict() for rule in app.rules],
        "created_at": format_datetime(app.created_at),
        "created_by": app.created_by,
    }
    if app.modified_at is not None:
        out["modified_at"] = format_datetime(app.modified_at)
    return out


def key_body(key: ApiKeyInfo) -> dict:
    return {"id": key.id, "application_id": key.application_id,
            "created_at": format_datetime(key.created_at)}
