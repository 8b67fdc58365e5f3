"""Audit events in Neo4j (cypher/audit/): group-committed batches, pages for GET /logs, chain
walks for verification, export and pruning. Events are plain dicts of their stored fields,
with `at` as an aware UTC datetime."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..audit.event import FIELDS, OUTCOMES
from ..audit.ids import (
    STORE_NAMES,
    TOKEN_REF,
    chain_forms,
    compact_ids,
    expand_ids,
    id_halves,
    id_parts,
    query_ids,
    token_scalar,
)
from ..audit.query import LogFilter
from .database import Database
from .records import EPOCH, MICROSECOND, at_number, one_list

BEGINNING = datetime(1, 1, 1, tzinfo=UTC)
END = datetime(9999, 12, 31, tzinfo=UTC)


def _statement(where: LogFilter) -> str:
    """The statement whose index answers the most selective filter first."""
    if where.token_id is not None:
        return "audit/list_by_token"
    if where.application_id is not None:
        return "audit/list_by_application"
    if where.operation is not None:
        return "audit/list_by_operation"
    if where.outcome is not None:
        return "audit/list_by_outcome"
    return "audit/list"


@dataclass(frozen=True, slots=True)
class ChainInfo:
    chain: str
    head: int | None
    checkpoint: tuple[int, str] | None
    checkpoint_sig: str | None
    placed: bool = False  # its events signed at their place, not after the MAC before


def native(at: Any) -> Any:
    """An event's time as read, as a Python datetime at offset UTC: an integer (microseconds
    since 1970, as events hold it since docs/adr/0028), or a DateTime (the driver's, zoned "UTC"
    when stored at offset Z, as events stored before hold it). Sent back as read, a DateTime
    would be a zone-id DateTime, which Cypher holds unequal to, and orders after, the stored
    value of the same instant: a cursor or cutoff made of one would skip or take an event it
    should not."""
    if isinstance(at, int) and not isinstance(at, bool):
        return EPOCH + at * MICROSECOND
    return at.to_native().astimezone(UTC) if hasattr(at, "to_native") else at


def time_forms(**bounds: datetime) -> list[dict[str, Any]]:
    """Bounds on events' times in both forms events hold them: as integers (since
    docs/adr/0028) and as DateTimes (events stored before). A range seek finds values of its
    bounds' type only, so the statements seek once per form (`UNWIND $times AS t`)."""
    return [{k: at_number(v) for k, v in bounds.items()}, bounds]


def mac_of(props: Mapping[str, Any]) -> Any:
    """The MAC an event stores, as the hex text it signed: two halves of raw bytes
    (`stored_form`), or the text events stored before hold (or whatever an edit left)."""
    mac, end = props.get("mac"), props.get(MAC_END)
    if isinstance(mac, bytes | bytearray) and isinstance(end, bytes | bytearray):
        return (bytes(mac) + bytes(end)).hex()
    if isinstance(mac, bytes | bytearray):
        return bytes(mac).hex()
    return mac


def event_of(props: Any) -> dict[str, Any]:
    """An event as stored, as the event it is: with its tokens' list and its MAC as hex text
    (`stored_form`)."""
    out = expand_ids(dict(props))
    if "mac" in out or MAC_END in out:
        out["mac"] = mac_of(out)
        out.pop(MAC_END, None)
    ref = out.pop(TOKEN_REF, None)  # an index key, not a field of the event
    if "token_ids" not in out:
        out["token_ids"] = [ref] if ref is not None else []
    if out.get("at") is not None:
        out["at"] = native(out["at"])
    return out


# What the store leaves out of an event (docs/adr/0024): `prev` repeats the MAC of the event
# before it in its chain, which is where every reader takes it from (audit/chain.py
# `verify_chain`, the pruner, cypher/audit/export); and `token_ids` unless it names several
# tokens: one is the scalar `token_id`, none is no property, and `event_of` gives the list back
# (no version ever stored a null list). And its MAC is stored as raw bytes, in two halves of
# 16 (`mac`, `mac_end`): 64 hex characters take a 128-byte string record of their own, while a
# byte array of 16 fits in the property record (three of its four 8-byte blocks; 32 bytes
# would not fit one property). Events stored before hold `prev`, the list and a hex MAC, which
# the readers use as they are.
DERIVED = ("prev",)
MAC_END = "mac_end"
MAC_HALF = 16


def stored_form(event: Mapping[str, Any]) -> dict[str, Any]:
    """The properties an event is stored as (its time apart): with its one token as the
    scalar `token_id`, and the ids the indexes hold as integers (audit/ids.py `compact_ids`)."""
    out = token_scalar({k: v for k, v in event.items() if k not in DERIVED})
    mac = out.get("mac")
    if isinstance(mac, str):
        raw = bytes.fromhex(mac)
        out["mac"], out[MAC_END] = raw[:MAC_HALF], raw[MAC_HALF:]
    return compact_ids(out, in_place=True)


def ref_parts(event: Mapping[str, Any], tokens: Any) -> dict[str, Any]:
    """What audit/write_batch gives an event naming several tokens, one `AUDIT_REF` self-loop
    a token: its tenant's key, and each token's key and rest (`ids.id_parts`,
    `ids.id_halves`; no rest for an id that is no UUID), from `tokens`, its list in its stored
    form (`stored_form`: None when it names one token or none, which it holds as its scalar).
    The AUDIT_REF index holds the keys; a seek checks the rest, or for an id with none the
    event's list. Each pair once (two ids a caller chose whose hashes agree would otherwise
    give one event twice to a seek's page). None for an event without a tenant either (refused
    before its key was known: no page of any tenant shows it)."""
    tenant_key = id_parts(event.get("tenant_id"))[0] if tokens is not None else None
    if tenant_key is None:
        return {"tenant_key": None, "refs": []}
    return {"tenant_key": tenant_key, "refs": [list(pair) for pair in
                                               dict.fromkeys(id_halves(tokens))]}


def created_parts(event: Mapping[str, Any]) -> dict[str, Any]:
    """An event no statement stored yet, as audit/write_batch takes it: its time as an integer
    (`at_number`), its AUDIT_REFs' keys (`ref_parts`) and its other fields, those without a
    value left out (a property that is not there reads as null, which is what was signed)."""
    stored = stored_form(event)
    fields = {k: v for k, v in stored.items() if k != "at" and v is not None}
    return {"at": at_number(event.get("at")), **ref_parts(event, stored.get("token_ids")),
            "fields": fields}


# What a write's statement may have stored that the event's stored form leaves out, so linking
# removes it: a field (the list of one token, as the expiry sweep and earlier versions' writes
# store it; a request's write stores the stored form, audit/context.py `stored_skeleton`), the
# scalar and the ids' integers.
_REMOVABLE = frozenset((*FIELDS, TOKEN_REF, *STORE_NAMES))
# What a write's statement may have stored of an event whose stored form it was not told.
_MAYBE_STORED = ("token_ids", "tenant_id", "application_id", TOKEN_REF, *STORE_NAMES)


def linked_parts(event: Mapping[str, Any], stored: Mapping[str, Any] | None
                 ) -> dict[str, Any]:
    """An event a write's statement stored (or may have stored) as `stored` (its stored form,
    or the fields a statement stored as text), as audit/write_batch takes it: `held`, the
    properties it stored with the value (and type) the event ends with; `fields`, the others,
    which linking writes — a null removes what the write stored, and a property it stored that
    the event no longer has is sent as null. Held and fields together are the whole event, so
    one whose write rolled back is created whole. `stored` None (not known): every property is
    sent, nulls included."""
    stored_event = stored_form(event)
    refs = ref_parts(event, stored_event.get("token_ids"))
    event = stored_event
    held: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    known = stored if stored is not None else {}
    # A property the stored form leaves out is sent as null when the write may have stored it.
    names = [*event, *(k for k in (*known, *(_MAYBE_STORED if stored is None else ()))
                       if k in _REMOVABLE and k not in event)]
    for k in dict.fromkeys(names):
        if k in ("at", "id"):
            continue
        v = event.get(k)
        if k in known and type(known[k]) is type(v) and known[k] == v:
            held[k] = v
        elif v is not None or k in known or stored is None:
            fields[k] = v
    return {"id": event["id"], "at": at_number(event.get("at")), **refs, "held": held,
            "fields": fields}


def with_prev(event: dict[str, Any], before: Mapping[str, Any] | None,
              checkpoint_mac: str | None, placed: bool = False) -> dict[str, Any]:
    """The event with its `prev`: its own if it holds one, else "" at 1, the MAC of the event
    `before` it in its chain, or the checkpoint's right after a pruned prefix (None when the
    event before is missing, or for an event in no chain). An event of a placed chain
    (audit/chain.py) is signed with none: None."""
    if event.get("prev") is not None:
        return event
    if placed:
        return {**event, "prev": None}
    seq = event.get("seq")
    prev = ("" if seq == 1 else mac_of(before) if before is not None else checkpoint_mac
            if seq is not None else None)
    return {**event, "prev": prev}


class ChainForked(RuntimeError):
    """A batch would have forked its chain (docs/audit.md): nothing of it was written."""


class AuditRepository:
    def __init__(self, db: Database):
        self._db = db

    async def write_batch(self, created: list[dict[str, Any]],
                          linked: list[tuple[dict[str, Any], Mapping[str, Any] | None]],
                          *, chain: str, head_seq: int) -> None:
        """Write a batch numbered up to `head_seq` into `chain`: `created`, events no
        statement was sent to store, and `linked`, events with what a write stored of them in
        its own transaction, or may have (completed with what differs, `linked_parts`; created
        whole if not there). Raises
        `ChainForked` (and writes no event) when the chain's head in Neo4j is not the number
        before the first."""
        if not created and not linked:
            return
        records = await self._db.write(
            "audit/write_batch", created=[created_parts(e) for e in created],
            linked=[linked_parts(e, stored) for e, stored in linked], chain=chain,
            head_seq=head_seq)
        if not records or not records[0]["in_order"]:
            raise ChainForked("the audit chain's head in Neo4j is not where this writer left "
                              "it; the batch was not written")

    async def page(self, *, tenant_id: str, where: LogFilter, before: tuple[datetime, str],
                   limit: int) -> list[dict[str, Any]]:
        records = await self._db.read(
            _statement(where), **query_ids(tenant_id=tenant_id, token_id=where.token_id,
                                           application_id=where.application_id),
            operation=where.operation, outcomes=list(OUTCOMES), outcome=where.outcome,
            times=time_forms(since=where.since or BEGINNING, until=where.until or END,
                             before=before[0]),
            before_id=before[1], limit=limit)
        return [event_of(e) for e in one_list(records, "events")]

    async def chains(self) -> list[ChainInfo]:
        records = await self._db.read("audit/chains")
        return [ChainInfo(r["chain"], r["head"],
                          (r["checkpoint_seq"], r["checkpoint_mac"])
                          if r["checkpoint_seq"] is not None else None, r["checkpoint_sig"],
                          r["placed"] is True)
                for r in records]

    async def chain_events(self, chain: str, *, page: int = 1000
                           ) -> AsyncIterator[dict[str, Any]]:
        after = -1
        while True:
            records = await self._db.read("audit/chain_events", chains=chain_forms(chain),
                                          after=after, limit=page)
            for r in records:
                yield event_of(r["event"])
            if len(records) < page:
                return
            after = records[-1]["event"]["seq"]

    async def unchained(self, limit: int = 1000) -> list[str]:
        return [r["id"] for r in await self._db.read("audit/unchained", limit=limit)]

    async def export(self, *, since: datetime, until: datetime, page: int = 1000
                     ) -> AsyncIterator[dict[str, Any]]:
        after_at, after_id = BEGINNING, ""
        while True:
            records = await self._db.read(
                "audit/export", times=time_forms(since=since, until=until, after=after_at),
                after_id=after_id, limit=page)
            for r in records:
                yield with_prev(event_of(r["event"]), r["before"], r["checkpoint_mac"],
                                r["placed"])
            if len(records) < page:
                return
            last = records[-1]["event"]
            after_at, after_id = native(last["at"]), last["id"]

    async def prune_prefix(self, chain: str, limit: int
                           ) -> tuple[tuple[int, str], bool, list[dict[str, Any]]]:
        """The chain's checkpoint, (0, "") if none, whether the chain is placed
        (audit/chain.py), and its next `limit` events above the checkpoint by `seq`, whole."""
        records = await self._db.read("audit/prune_prefix", chain=chain,
                                      chains=chain_forms(chain), limit=limit)
        return ((records[0]["done"], records[0]["done_mac"]), records[0]["placed"] is True,
                [event_of(e) for e in records[0]["events"]])

    async def prune_leftovers(self, cutoff: datetime, after: tuple[datetime, str], batch: int
                              ) -> list[dict[str, Any]]:
        records = await self._db.read("audit/prune_leftovers",
                                      times=time_forms(cutoff=cutoff, after=after[0]),
                                      after_id=after[1], batch=batch)
        return [{**r, "at": native(r["at"])} for r in records]

    async def prune(self, events: list[Mapping[str, Any]], checkpoints: list[dict[str, Any]]
                    ) -> int:
        """Delete `events` ({id, chain, seq} of a chain's prefix as `prune_prefix` read them,
        or {id, node} as `prune_leftovers` did) and move the `checkpoints` forward."""
        records = await self._db.write(
            "audit/prune", checkpoints=checkpoints,
            events=[{"id": e["id"], "chains": chain_forms(e["chain"]) if e.get("chain") else [],
                     "seq": e.get("seq"), "node": e.get("node")} for e in events])
        return records[0]["pruned"] if records else 0
