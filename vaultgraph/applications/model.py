"""Applications and their API keys as the domain sees them (never a key, only its id)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from ..auth.rules import Rule


@dataclass(frozen=True)
class Application:
    id: str
    tenant_id: str
    name: str
    permissions: tuple[str, ...]
    rules: tuple[Rule, ...]
    created_at: datetime
    created_by: str | None
    modified_at: datetime | None = None


@dataclass(frozen=True)
class ApiKeyInfo:
    id: str
    application_id: str
    created_at: datetime


@dataclass(frozen=True)
class ApplicationDraft:
    """What a create or a replace writes: validated, normalised, already checked for grants."""
    name: str
    permissions: tuple[str, ...]
    rules: tuple[Rule, ...]

    def params(self) -> dict[str, Any]:
        return {"name": self.name, "permissions": list(self.permissions),
                "rules": orjson.dumps([r.to_dict() for r in self.rules]).decode()}
