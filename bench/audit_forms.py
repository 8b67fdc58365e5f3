"""Other ways a write's audit event could be stored, measured before any is built
(`BENCH_AUDIT_AB_FORMS` in bench/audit_ab.py). The service stores a write's event in the
write's own transaction, incomplete and labelled pending, and its audit writer completes and
links it into its chain afterwards (a second write to the event). Each form here is the
cheapest the database work of an alternative could be, so what it saves against the
service's form is an upper bound on what building it could save:

- `once`: the write's transaction stores the event complete, with its chain, number and MAC
  (a random MAC and a number from a counter: what the database stores, not what a real
  signer would sign), and is never written again; the writer's batch records only a block
  naming the batch's write events (one node with their ids and MACs) where the service
  completes each. The chain would then be a chain of blocks.
- `ahead`: the event is group-committed ahead of the write (the request waits for that
  commit, as a read waits for its event's), stored pending as the write's statement stores it
  today, and the write carries none; after the write the writer links it as it links a write's
  event today. The change would keep the service's linking and move only where the event is
  first stored; no change could then be committed without its event, which is committed
  first.
- `intent`: `ahead` without the link: the event is group-committed, complete, before the
  write, and never written again. The least any form storing the event outside the write's
  transaction could cost.

Where a form does less than a built one would (so its saving is a little high): `once`'s
event lacks `status` and `key_version` (today's link writes them) and no constraint checks its
place; `once`'s and `ahead`'s batches run on a plain session, without `Database`'s retries and
metrics; `ahead` and `intent` writes leave out the idempotency mark's seek. And where it may do
more: `ahead`'s link is handed over without an announced arrival (that went with the event
before the write), so batches do not wait for it and may be smaller.

None of these is the product's: they live here, beside the benchmark that measures them.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

import neo4j

from vaultgraph.audit import context as audit_context
from vaultgraph.repository.audit import (
    AuditRepository,
    ChainForked,
    created_parts,
    linked_parts,
)
from vaultgraph.repository.audit_prefix import AUDIT_PREFIX, audited_params, with_prefix
from vaultgraph.repository.records import at_number

FORMS = ("once", "ahead", "intent")
# The request's arrival (AuditWriter.arriving), for a form that hands the event over before
# the write (`ahead`, `intent`): the writer's batch stops waiting for it once it is handed.
ARRIVAL: ContextVar[Any] = ContextVar("bench_audit_arrival", default=None)

AHEAD = "bench_ahead"  # an event's key holding its stored skeleton, when it is stored ahead


def variant(text: str, old: str, new: str) -> str:
    """`text` with `old` (which it must hold) replaced by `new`: each form's statement is the
    service's with one part changed, so it follows the service's as that changes, and a change
    that removes the part fails here instead of measuring something else."""
    if old not in text:
        raise RuntimeError(f"the service's statement no longer holds {old[:60]!r}")
    return text.replace(old, new)


_HEAD = ("WITH c, coalesce(c.seq, 0) = $head_seq - size($created) - size($linked) - size($blocks)"
         "\n          AS in_order\n")
_LINKS = re.compile(r"FOREACH \(ev IN CASE WHEN in_order THEN \$linked.*?(?=\nFOREACH \(ev IN "
                    r"CASE WHEN in_order THEN \$blocks)", re.DOTALL)
# `once`: the service's prefix (repository/audit_prefix.py) storing the event complete: no
# pending label (no entry in its unique index, none to remove), its chain's fields set by the
# write. `_block`: the service's batch (cypher/audit/write_batch) with one block naming the
# write events in place of completing each. `_ahead`: the same batch storing, first, the events
# handed over ahead of their write, pending, as the write's statement would have stored them.
_ONCE_PREFIX = variant(
    AUDIT_PREFIX, "CREATE (audit_event:AuditEvent:PendingAuditEvent $audit) "
    "SET audit_event.at = $audit_at }",
    "CREATE (audit_event:AuditEvent) SET audit_event = $audit, audit_event.at = $audit_at, "
    "audit_event.chain = $audit_chain, audit_event.seq = $audit_seq, "
    "audit_event.mac = $audit_mac, audit_event.mac_end = $audit_mac_end }")


@functools.cache  # built once per catalog text, not per batch
def _block(batch: str) -> str:
    if not _LINKS.search(batch):
        raise RuntimeError("the service's batch no longer links write events as it did")
    return _LINKS.sub(lambda _: (
        "FOREACH (_ IN CASE WHEN in_order AND size($linked) > 0 THEN [1] ELSE [] END |\n"
        "  CREATE (:AuditBlock {chain: $chain, seq: $head_seq, ids: $linked, macs: $macs}))"),
        batch)


@functools.cache
def _ahead(batch: str) -> str:
    return variant(batch, _HEAD, _HEAD.replace("size($linked)", "size($ahead) - size($linked)")
                   + "FOREACH (ev IN CASE WHEN in_order THEN $ahead ELSE [] END |\n"
                   "  CREATE (e:AuditEvent:PendingAuditEvent)\n"
                   "  SET e = ev.fields, e.at = ev.at)\n")


_CHAIN = 4_200_000_000_000_000_001  # a chain id as the service stores one (an integer)


class Form:
    """How a write's event travels with the bare side's write (bench/workloads.py
    `BareDriver`), and whether the writer hears of it after the write (`linked_after`)."""

    def __init__(self, name: str) -> None:
        if name not in FORMS:
            raise SystemExit(f"no audit form {name!r}; known: {', '.join(FORMS)}")
        self.name = name
        self.linked_after = name in ("once", "ahead")
        self._seq = itertools.count(1)

    async def statement(self, ctx: Any, text: str, params: dict[str, Any],
                        event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The statement and parameters the write sends, its event handed over first if the
        form says so."""
        if self.name == "intent":
            note = audit_context.current.get()
            await ctx.audit.record({**note.skeleton(), "status": 200}, ARRIVAL.get())
            return text, params
        if self.name == "ahead":
            note = audit_context.current.get()
            await ctx.audit.record({**note.skeleton(), AHEAD: event}, ARRIVAL.get())
            return text, params
        raw = os.urandom(32)
        return with_prefix(_ONCE_PREFIX, text), {
            **audited_params(params, event), "audit_chain": _CHAIN,
            "audit_seq": next(self._seq), "audit_mac": raw[:16], "audit_mac_end": raw[16:]}


async def _batch(db: Any, text: str, params: dict[str, Any]) -> None:
    """One batch in its form's statement, refused as the service's is when the chain's head
    is not where the writer left it."""
    async with db.session(neo4j.WRITE_ACCESS) as session:
        record = await (await session.run(text, params)).single()
    if record is None or not record["in_order"]:
        raise ChainForked("the chain's head is not where this writer left it")


class BlockRepository(AuditRepository):
    """The audit repository of form `once`: a batch's write events are already complete, so
    the batch stores its other events as the service does and one block naming the write
    events instead of completing each."""

    async def write_batch(self, created: list[dict[str, Any]],
                          linked: list[tuple[dict[str, Any], Mapping[str, Any] | None]],
                          *, chain: str, head_seq: int, **_: Any) -> None:
        if created or linked:
            await _batch(self._db, _block(self._db.catalog.text("audit/write_batch")), {
                "created": [created_parts(e) for e in created],
                "linked": [e["id"] for e, _ in linked], "macs": os.urandom(32 * len(linked)),
                "chain": chain, "head_seq": head_seq, "blocks": [], "placed": []})


class AheadRepository(AuditRepository):
    """The audit repository of form `ahead`: an event handed over ahead of its write is stored
    pending, as the write's statement would have stored it, and not linked into the chain (its
    number stays unused: this measures the database's work, not a chain that verifies); the
    others as the service stores them."""

    async def write_batch(self, created: list[dict[str, Any]],
                          linked: list[tuple[dict[str, Any], Mapping[str, Any] | None]],
                          *, chain: str, head_seq: int, **_: Any) -> None:
        if not created and not linked:
            return
        ahead = [{"at": at_number(e["at"]), "fields": {k: v for k, v in e[AHEAD].items()
                                                         if k != "at"}}
                 for e in created if AHEAD in e]
        await _batch(self._db, _ahead(self._db.catalog.text("audit/write_batch")), {
            "created": [created_parts(e) for e in created if AHEAD not in e],
            "ahead": ahead, "linked": [linked_parts(e, stored) for e, stored in linked],
            "chain": chain, "head_seq": head_seq, "blocks": [], "placed": []})


def repository(form: Form | None, db: Any) -> AuditRepository:
    """The audit repository a side with `form` (None: the service's) writes its batches by."""
    kind = {"once": BlockRepository, "ahead": AheadRepository}.get(form.name if form else "")
    return (kind or AuditRepository)(db)
