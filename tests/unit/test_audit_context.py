"""What a request's audit note does with a second write: an update whose first write, sent
without the token's lock, found the token changed is written again under the lock, in the same
request (services/tokens.py `update`); and where a write's statement creates the event
(repository/audit_prefix.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from vaultgraph.audit import context as audit_context
from vaultgraph.catalog import Catalog
from vaultgraph.repository.audit_prefix import (
    AUDIT_HERE,
    AUDIT_PREFIX,
    PLACED_PREFIX,
    audited_text,
    creates_with_change,
)


class Placer:
    """Gives each event it is asked to place the next number, as the audit writer does."""

    def __init__(self):
        self.placed: list[dict] = []

    def place(self, event: dict) -> dict:
        placed = {**event, "kind": "write", "seq": len(self.placed) + 1}
        self.placed.append(placed)
        return placed


@pytest.fixture
def note():
    note = audit_context.AuditNote(id=str(uuid.uuid4()), at=datetime.now(UTC),
                                   operation="token:update", route="PATCH /tokens/{id}",
                                   trace_id=None)
    note.principal = SimpleNamespace(tenant_id="t", key_id="k", application_id="a")
    note.placer = Placer()
    token = audit_context.current.set(note)
    yield note
    audit_context.current.reset(token)


def test_a_second_write_sends_the_same_place(note):
    # An update whose first write found its token changed stored nothing (its prefix comes
    # after the check): its write under the lock sends the event at the place it was given.
    audit_context.expect(200, "mask")
    first = audit_context.write_event()
    assert first is not None and first["seq"] == 1
    assert audit_context.write_event() is first
    assert note.placer.placed == [first]  # no second place taken


def test_once_placed_the_declared_event_stands(note):
    # The request's end compares its outcome with what was placed: a later declaration (the
    # update worked out again, under the lock) must not change what it is compared with.
    audit_context.expect(200, "mask")
    placed = audit_context.write_event()
    declared = note.expected
    audit_context.written()
    audit_context.expect(200, "redact")  # the token moved meanwhile: shown redacted now
    assert note.expected is declared
    assert placed["transform"] == declared["transform"] == "mask"
    audit_context.note_shown(["tok"], ["redact"])
    ended = note.event(200)
    assert ended["transform"] == "redact"
    assert ended != note.expected  # so the request's end writes its event again at its place


def test_before_any_write_a_declaration_may_change(note):
    audit_context.expect(200, "mask")
    audit_context.expect(200, "redact")
    assert note.expected["transform"] == "redact"


def test_the_prefix_goes_in_front_unless_the_statement_says_where():
    assert audited_text("MATCH (t) RETURN t") == AUDIT_PREFIX + "MATCH (t) RETURN t"
    text = f"MATCH (t) WITH t WHERE t.x = 1\n{AUDIT_HERE}\nSET t.y = 2"
    assert audited_text(text) == "MATCH (t) WITH t WHERE t.x = 1\n" + AUDIT_PREFIX + "SET t.y = 2"
    assert audited_text(text, placed=True) == (
        "MATCH (t) WITH t WHERE t.x = 1\n" + PLACED_PREFIX + "SET t.y = 2")
    assert creates_with_change(text) and not creates_with_change("MATCH (t) RETURN t")


def test_only_the_update_creates_its_event_with_its_change():
    catalog = Catalog.load()
    assert [n for n in catalog.names() if creates_with_change(catalog.text(n))] == [
        "tokens/update"]
    audited = audited_text(catalog.text("tokens/update"))
    check = audited.index("t.data_ct = $read_data_ct")
    assert check < audited.index("CREATE (audit_event:AuditEvent") < audited.index("SET t +=")
