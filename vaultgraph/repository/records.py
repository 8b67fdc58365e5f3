"""How values travel to and from Neo4j: datetimes sent as text, pages received as one list."""

from __future__ import annotations

from typing import Any

import neo4j


def datetime_text(value: Any) -> Any:
    """A datetime as the ISO-8601 text a statement turns back into the same DateTime with
    Cypher's `datetime()` (which also takes null). The driver packs a Python datetime through
    pure-Python time arithmetic, about 0.23 ms a value here; the text costs microseconds
    (docs/audit.md, "Cost and growth"). Anything else passes through unchanged."""
    return value.isoformat() if hasattr(value, "isoformat") else value


def one_list(records: list[neo4j.Record], key: str) -> list[Any]:
    """The list a page statement collects into its one record (`RETURN collect(...) AS key`).

    A page comes back as one record rather than a record per row: the driver's cost is per
    message (a socket read, a Record, a hydration pass each), so one message of 50 maps costs a
    fraction of 50 messages (docs/performance.md)."""
    return records[0][key] if records else []
