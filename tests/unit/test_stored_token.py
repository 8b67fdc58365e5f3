"""A token's stored times as the statements return them (the @token(t) fragment: ISO 8601 text
as Neo4j prints it) become the same datetimes the driver's temporal values did."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from neo4j.time import DateTime

from vaultgraph.tokens.stored import StoredToken

BASE = {"id": "t1", "tenant_id": "a", "type": "card", "containers": ["/"]}


@pytest.mark.parametrize(("printed", "expected"), [
    ("2026-11-23T22:26:31.123Z", datetime(2026, 11, 23, 22, 26, 31, 123000, tzinfo=UTC)),
    # Neo4j prints up to nanoseconds; Python keeps microseconds (as DateTime.to_native does).
    ("2026-11-23T22:26:31.123456789Z", datetime(2026, 11, 23, 22, 26, 31, 123456, tzinfo=UTC)),
    ("2026-11-23T22:26:31Z", datetime(2026, 11, 23, 22, 26, 31, tzinfo=UTC)),
    ("2027-01-31T23:59:59+01:00",
     datetime(2027, 1, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=1)))),
    # A named zone: the offset before the bracket is exact.
    ("2027-01-31T23:59:59+01:00[Europe/Paris]",
     datetime(2027, 1, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=1)))),
])
def test_printed_times_are_read_as_the_instant_they_name(printed, expected):
    token = StoredToken.from_properties({**BASE, "created_at": printed, "expires_at": printed,
                                         "modified_at": printed})
    for value in (token.created_at, token.expires_at, token.modified_at):
        assert value == expected
        assert value.utcoffset() == expected.utcoffset()


def test_driver_temporal_values_and_absent_times_still_read():
    moment = DateTime(2026, 11, 23, 22, 26, 31, 500_000_000, tzinfo=UTC)
    token = StoredToken.from_properties({**BASE, "created_at": moment, "expires_at": None})
    assert token.created_at == datetime(2026, 11, 23, 22, 26, 31, 500000, tzinfo=UTC)
    assert token.expires_at is None
    assert token.modified_at is None
