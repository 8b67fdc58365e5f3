"""The ids the request path makes for every request without `uuid.UUID` (api/middleware.py):
each must be what `uuid.uuid4()` would have given, in the same text form."""

from __future__ import annotations

import re
import uuid

from vaultgraph.api.middleware import new_uuid4_hex, new_uuid4_text, well_formed_trace_id


def test_a_new_trace_id_is_a_version_4_uuid_s_hex_and_a_well_formed_w3c_trace_id():
    ids = {new_uuid4_hex() for _ in range(500)}
    assert len(ids) == 500
    for value in ids:
        parsed = uuid.UUID(hex=value)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert parsed.hex == value
        assert well_formed_trace_id(value)


def test_a_new_event_id_is_a_version_4_uuid_in_its_canonical_text():
    ids = {new_uuid4_text() for _ in range(500)}
    assert len(ids) == 500
    for value in ids:
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                            value)
        parsed = uuid.UUID(value)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, value)
