"""What a request's audit note does with a second write: an update whose first write, sent
without the token's lock, found the token changed is written again under the lock, in the same
request (services/tokens.py `update`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from vaultgraph.audit import context as audit_context


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


def test_a_write_after_the_event_committed_sends_none(note):
    audit_context.expect(200, "mask")
    first = audit_context.write_event()
    assert first is not None and first["seq"] == 1
    audit_context.written()
    assert audit_context.write_event() is None
    assert note.placer.placed == [first]  # no second place taken


def test_a_write_whose_commit_is_unknown_sends_the_same_place_again(note):
    # Not committed as far as the request knows: a second statement sends the same place,
    # which Neo4j refuses if the first did commit.
    audit_context.expect(200, "mask")
    first = audit_context.write_event()
    assert audit_context.write_event() is first


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
