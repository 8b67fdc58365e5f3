"""How values travel to and from Neo4j: datetimes sent as text (an audit event's as an integer),
pages received as one list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import neo4j

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def datetime_text(value: Any) -> Any:
    """A datetime as the ISO-8601 text a statement turns back into the same DateTime with
    Cypher's `datetime()` (which also takes null). The driver packs a Python datetime through
    pure-Python time arithmetic, about 0.23 ms a value here; the text costs microseconds
    (docs/audit.md, "Cost and growth"). Anything else passes through unchanged."""
    return value.isoformat() if hasattr(value, "isoformat") else value


def at_number(at: Any) -> Any:
    """An audit event's time as it is stored (docs/adr/0028): the microseconds since 1970 of a
    datetime (exact: integer arithmetic, no float), anything else (None) as it is."""
    return (at - EPOCH) // MICROSECOND if isinstance(at, datetime) else at


def one_list(records: list[neo4j.Record], key: str) -> list[Any]:
    """The list a page statement collects into its one record (`RETURN collect(...) AS key`).

    A page comes back as one record rather than a record per row: the driver's cost is per
    message (a socket read, a Record, a hydration pass each), so one message of 50 maps costs a
    fraction of 50 messages (docs/performance.md)."""
    return records[0][key] if records else []
