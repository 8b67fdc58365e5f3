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
    expand_ids,
    query_ids,
)
from ..audit.query import LogFilter
from .audit_form import (
    MAC_END,
    created_parts,
    placed_parts,
    ref_parts,
    stored_form,
)
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
    writes: bool = False  # a chain of write events (audit/chain.py `verify_writes`)
    until: datetime | None = None  # a chain of write events: from when it gives no number
    holds: bool = True  # a chain of write events: whether any event still stands in it
    # The key version its checkpoint is signed under (None: stored before checkpoints named it).
    checkpoint_key_version: str | None = None


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
                          *, chain: str, head_seq: int, blocks: list[dict[str, Any]] = (),
                          placed: list[dict[str, Any]] = ()) -> None:
        """Write a batch numbered up to `head_seq` into `chain`: `created`, events no
        statement was sent to store, `linked`, events with what a write stored of them in
        its own transaction, or may have (completed with what differs, `linked_parts`; created
        whole if not there), and `blocks`, which settle write events; and `placed`, write events
        written whole at their places in their own chain. Raises
        `ChainForked` (and writes no event) when the chain's head in Neo4j is not the number
        before the first."""
        if not created and not linked and not blocks:
            return
        records = await self._db.write(
            "audit/write_batch", created=[created_parts(e) for e in created],
            linked=[linked_parts(e, stored) for e, stored in linked], chain=chain,
            head_seq=head_seq, blocks=[created_parts(e) for e in blocks],
            placed=[placed_parts(e) for e in placed])
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

    async def open_write_chain(self, chain: str, until: datetime) -> None:
        """Make a chain of write events (cypher/audit/open_write_chain); raises
        `UniquenessViolation` when a chain holds the id."""
        await self._db.write("audit/open_write_chain", chain=chain, until=at_number(until))

    async def blocks(self, chain: str) -> list[dict[str, Any]]:
        """The blocks stored that settle the chain of write events `chain`."""
        return [event_of(r["event"]) for r in await self._db.read("audit/blocks", chain=chain)]

    async def block_pins(self, chain: str, until: datetime) -> set[Any]:
        """Every number the blocks stored before `until` name in the chain of write events
        `chain` (whatever their MACs)."""
        records = await self._db.read("audit/block_pins", chain=chain, until=at_number(until))
        return {seq for r in records if isinstance(r["pins"], list) for seq in r["pins"]}

    async def chains(self) -> list[ChainInfo]:
        records = await self._db.read("audit/chains")
        return [ChainInfo(r["chain"], r["head"],
                          (r["checkpoint_seq"], r["checkpoint_mac"])
                          if r["checkpoint_seq"] is not None else None, r["checkpoint_sig"],
                          r["placed"] is True, r["writes"] is True,
                          native(r["until"]) if r["until"] is not None else None,
                          r["holds"] is not False, r["checkpoint_key_version"])
                for r in records]

    async def retire_write_chains(self, chains: list[str], before: datetime) -> int:
        """Delete those of the chains of write events `chains` whose numbers ended before
        `before` and that neither hold an event nor are named by a stored block
        (cypher/audit/retire_write_chains); how many went."""
        if not chains:
            return 0
        records = await self._db.write("audit/retire_write_chains", chains=chains,
                                       before=at_number(before))
        return records[0]["retired"] if records else 0

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
