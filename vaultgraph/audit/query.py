"""What a reader of the trail asks for (GET /logs filters); all are ANDed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class LogFilter:
    token_id: str | None = None
    application_id: str | None = None
    operation: str | None = None
    outcome: str | None = None
    since: datetime | None = None
    until: datetime | None = None
