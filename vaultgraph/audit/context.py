"""What one request touched, noted by the services as they work and read by the audit
middleware when the response is known. A context variable, so services need no HTTP object
and a use case run outside a request (the CLI, the sweeper) notes into nothing."""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from ..tokens.fields import TOKEN_ID_MAX_LENGTH
from .event import MAX_TOKEN_IDS, outcome_of
from .ids import compact_ids, token_scalar


@dataclass
class AuditNote:
    id: str
    at: datetime
    operation: str | None
    route: str | None
    trace_id: str | None
    client_ip: str | None = None
    user_agent: str | None = None
    token_ids: list[str] = field(default_factory=list)
    transforms: Counter = field(default_factory=Counter)
    reason: str | None = None
    # Set by a write whose transaction also created the event: it is already durable.
    persisted: bool = False
    # The tokens named when that write was sent (`write_event`): what its statement marks on
    # the request's Idempotency-Key entry.
    written_tokens: list[str] | None = None
    # What a write's statement carrying the event stored, set when the statement is sent: whether
    # it committed may be unknown (a deadline or a dropped connection before the commit's
    # answer), so the event is linked by id, never created a second time; and linking it writes
    # only the fields that differ from these.
    stored: dict[str, Any] | None = None
    principal: Any = None
    # The Idempotency-Key entry this request claimed ({application_id, key, claim}): a write's
    # own transaction marks it written (repository/audit_prefix.py AUDIT_PREFIX), so a retry can
    # tell a write that committed from one that did not.
    idempotency: dict[str, str] | None = None
    # What a write declared it expects the request's event to be when it ends as expected
    # (`expect`), and, once its statement was sent with that event placed (`write_event`), the
    # event as signed at its place; `placer`, the audit writer that gives places.
    expected: dict[str, Any] | None = None
    placed: dict[str, Any] | None = None
    placer: Any = None

    def event(self, status: int, principal: Any = None,
              transforms: Counter | None = None) -> dict[str, Any]:
        """The request's event, as it ends with `status` (by `principal`, else the note's;
        `transforms`, else the note's)."""
        p = principal or self.principal
        counts = dict(self.transforms if transforms is None else transforms)
        single = next(iter(counts)) if len(counts) == 1 else None
        return {
            "id": self.id, "at": self.at,
            "tenant_id": p.tenant_id if p else None,
            "application_id": p.application_id if p else None,
            "key_id": p.key_id if p else None,
            "operation": self.operation, "route": self.route,
            "token_ids": self.token_ids[:MAX_TOKEN_IDS], "outcome": outcome_of(status),
            "status": status,
            "transform": single,
            "transform_counts": orjson.dumps(counts).decode() if len(counts) > 1 else None,
            "trace_id": self.trace_id, "client_ip": self.client_ip,
            "user_agent": self.user_agent, "reason": self.reason,
        }

    def name_tokens(self, ids) -> None:
        """Note the tokens the request named, each once. An id longer than any token id may be
        names no token and is left out: held as text (an id that is no UUID keeps its text, in
        the event's list and in an index on text where the event holds its ids so), it could
        pass the range index's key limit and fail the group commit that carries other
        requests' events."""
        named = self.token_ids
        seen = set(named)
        for token_id in ids:
            if len(token_id) <= TOKEN_ID_MAX_LENGTH and token_id not in seen:
                seen.add(token_id)
                named.append(token_id)

    def skeleton(self) -> dict[str, Any]:
        """The fields a write's transaction stores with the change: all the request knew when
        it was sent. The rest (status, transform, the chain's fields, and whatever changed
        since) are written when the request's event is linked into its chain."""
        p = self.principal
        return {
            "id": self.id, "at": self.at, "operation": self.operation, "route": self.route,
            "trace_id": self.trace_id, "tenant_id": p.tenant_id if p else None,
            "application_id": p.application_id if p else None,
            "key_id": p.key_id if p else None, "token_ids": list(self.token_ids),
            "client_ip": self.client_ip, "user_agent": self.user_agent,
            "outcome": "success",
        }


current: ContextVar[AuditNote | None] = ContextVar("audit_note", default=None)


def note_tokens(ids: list[str] | tuple[str, ...], transform: str | None = None) -> None:
    note = current.get()
    if note is None:
        return
    note.name_tokens(ids)
    if transform is not None:
        note.transforms[transform] += len(ids) or 1


def note_shown(ids: list[str], transforms: list[str]) -> None:
    """Each token shown, under its transform: `note_tokens((id,), transform)` for each pair, in
    one call for a page."""
    note = current.get()
    if note is None:
        return
    note.name_tokens(ids)
    note.transforms.update(transforms)


def note_transforms(counts: dict[str, int]) -> None:
    """Add counts of transforms shown (an idempotent replay shows what its first answer did)."""
    note = current.get()
    if note is not None:
        note.transforms.update(counts)


def note_reason(reason: str) -> None:
    note = current.get()
    if note is not None and note.reason is None:
        note.reason = reason


def note_route(route: str) -> None:
    """Name the request's route more precisely than its template (a proxy call names its
    proxy); never with anything a caller could put a secret in."""
    note = current.get()
    if note is not None:
        note.route = route


def stored_skeleton(skeleton: dict[str, Any]) -> dict[str, Any]:
    """A skeleton as a write's transaction stores it: in the form its linked event keeps
    (repository/audit.py `stored_form`): its tokens as `ids.token_scalar` keeps them (several:
    the list, which linking gives an AUDIT_REF each), its ids as integers (`ids.compact_ids`).
    So the token's index finds the event before it is linked (the list is in no index), and
    linking writes only what the request learnt after the write (its status and transform,
    the chain's fields)."""
    return compact_ids(token_scalar(dict(skeleton)), in_place=True)


def expect(status: int, *shown: str | None) -> None:
    """Declare what the request's event will be if it ends as its next write expects: answered
    `status`, showing one more token under each transform of `shown` (a create one, a tokenize
    one an item). Its write may then store the event complete at a place of its own
    (`write_event`), and nothing more is written of it when the request ends so."""
    note = current.get()
    if note is None or note.principal is None or note.placed is not None:
        # Once sent placed, the event stands as it was declared; the request's end compares
        # its outcome with that (`expected`), and writes it again at its place if it differs.
        return
    transforms = Counter(note.transforms)
    transforms.update(t for t in shown if t is not None)
    note.expected = note.event(status, transforms=transforms)


def write_event() -> dict[str, Any] | None:
    """The event for a write's own transaction, or None outside a request: the expected event
    (`expect`) signed at its place, when the request declared one and the writer gives a place
    (its `kind` then says so); otherwise the skeleton, stored pending, as it is stored
    (`stored_skeleton`). The caller sends it: from here on the event may be stored
    (`AuditNote.stored`, `AuditNote.placed`)."""
    note = current.get()
    if note is None or note.principal is None:
        return None
    note.written_tokens = list(note.token_ids)
    if note.placed is not None:  # a second write sends the same place, refused if stored
        return note.placed
    if note.expected is not None and note.placer is not None:
        note.placed = note.placer.place(note.expected)
        if note.placed is not None:
            note.stored = note.placed  # sent: the write may have stored it
            return note.placed
        note.expected = None
    note.stored = stored_skeleton(note.skeleton())
    return note.stored


def written_tokens() -> list[str] | None:
    """The tokens named when the request's write was sent (`write_event`), or None."""
    note = current.get()
    return note.written_tokens if note is not None else None


def claimed_key() -> dict[str, str] | None:
    """The Idempotency-Key entry the current request holds, for its write to mark."""
    note = current.get()
    return note.idempotency if note is not None else None


def written() -> None:
    """The write's transaction committed with its event."""
    note = current.get()
    if note is not None:
        note.persisted = True
