"""Chains over audit events, and their verification.

Each writer process numbers its events in chains of its own: `seq` counts up from 1 with no
gap, and `mac` is HMAC-SHA256 over every other field under the audit key of `key_version`
(derived from the key-encryption key of that version). Sequence numbers are given when a batch
of events is written, and the writer's state only moves on once that write committed, so a
rolled-back batch or write leaves no gap; a batch whose outcome is uncertain ends the chain and
the writer starts a new one, so no sequence number is ever used twice.

A chain is one of two forms. A placed chain (its node's `placed`, every chain started since
that form) signs each event's own fields, its place (`chain`, `seq`) among them: an event holds
only at its own place, whatever is done to the others. A chain started before also signs
`prev`, the MAC of the event before it (of the checkpoint left by pruning, or "" at the start),
so an event is checked only where the one before it is known.

Verification names each event that was edited (its MAC fails), deleted (its sequence number is
missing, or the chain ends before its recorded head), inserted (a second event at a sequence
number, or one that belongs to no chain's order), or reordered (its MAC holds at another
position).

A create's event is stored by its write's own statement, complete and signed at a number of a
chain of write events (its node marked `writes`; `kind` "write" on each event, signed): numbers
are given when writes are sent, so a chain of write events may have holes. Blocks settle its
events: a block (`kind` "block") is an event of a lane's chain like any other, and names the
chain it settles, the numbers it settles (`pins`) and the MAC each holds (`pin_macs`), under
its own MAC. Each number a block pins must hold one event, signed there, with the MAC pinned by
the latest block that pins it (an event written again at its place after a batch that may have
committed is pinned again); an event no block pins is named `unsettled` (its request had not
ended, or its process stopped before its batch: as an event a write stored and no batch linked
is named `unlinked`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..crypto import CryptoError, KeyRing
from .event import BLOCK, WRITE, canonical

# The event a finding names when a chain's `placed` mark does not match its events.
PLACED_MARK = "placed mark"
# The event a finding names when a chain's `writes` mark does not match its events.
WRITES_MARK = "writes mark"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # edited | deleted | inserted | reordered | unlinked | unsettled
    chain: str | None
    seq: int | None
    event_id: str | None

    def describe(self) -> str:
        where = (("no chain" if not self.chain else f"chain {self.chain}")
                 + (f" seq {self.seq}" if self.seq is not None else ""))
        return f"{self.kind}: {where}" + (f" (event {self.event_id})" if self.event_id else "")


# The kinds of finding that name an event for its MAC (one signed under a key the ring lacks, or
# does not hold as it did when it signed, is named so too).
SIGNED_KINDS = frozenset(("edited", "inserted", "reordered", "unsettled"))


@dataclass(frozen=True, slots=True)
class KeyProblem:
    """What a verification could not check for want of a key: the events and checkpoints signed
    under `version` (None: checkpoints stored before they named their key version), which the
    ring lacks (`missing`), or under which nothing holds with the ring's key of that version."""

    version: str | None
    missing: bool
    events: int
    checkpoints: int
    # Read as a finding's: it names no place.
    kind = "key"
    chain = seq = event_id = None

    def describe(self) -> str:
        what = " and ".join(f"{n} {noun}(s)" for n, noun in ((self.events, "event"),
                                                           (self.checkpoints, "checkpoint"))
                            if n)
        if self.version is None:
            return f"{what} stored without a key version hold under no key in the ring"
        if self.missing:
            return f"key version {self.version} is not in the key ring ({what} signed under it)"
        return (f"key version {self.version} in the key ring is not the key that signed "
                f"{what}")


class KeyCheck:
    """A key ring as a verification reads it: the ring's MACs, and a count for each key
    version of the MACs that held under it (`valid`) and of the versions asked for that the
    ring lacks. A MAC that holds proves the ring's key of its version is the one that signed;
    a version under which none held did not sign what names it (services/audit_log.py)."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring
        self.active = ring.active
        self.versions = ring.versions
        self.held: Counter[str] = Counter()
        self.missing: set[str] = set()

    def version_of(self, signed: Mapping[str, Any]) -> str | None:
        """The key version an event or checkpoint is checked under (its own, or the active one
        when it names none); None when it names one no key could have (an edit)."""
        version = signed.get("key_version") or self.active
        return version if isinstance(version, str) else None

    def audit_mac(self, message: bytes, version: str | None = None) -> str:
        try:
            return self.ring.audit_mac(message, version)
        except CryptoError:
            if isinstance(version or self.active, str):
                self.missing.add(version or self.active)
            raise


Ring = KeyRing | KeyCheck


def sign(ring: Ring, event: Mapping[str, Any]) -> str:
    return ring.audit_mac(canonical(event), event.get("key_version"))


def valid(ring: Ring, event: Mapping[str, Any], **override: Any) -> bool:
    """Whether the event's MAC holds (with `override` fields in place of its own); not when a
    field holds what no event is signed with (an edit in the store: a byte array where text
    was, say). Read through a `KeyCheck`, a MAC that holds is counted under its version."""
    signed = {**event, **override}
    try:
        held = sign(ring, signed) == event.get("mac")
    except (CryptoError, TypeError, ValueError):
        return False
    if held and isinstance(ring, KeyCheck):
        ring.held[ring.version_of(signed)] += 1
    return held


def stores_prev(event: Mapping[str, Any]) -> bool:
    """Whether the event was stored with its `prev` (by a version before the store left it out:
    it repeats the MAC of the event before it in the chain, which is where the readers take it
    from)."""
    return event.get("prev") is not None


def holds(ring: Ring, event: Mapping[str, Any], prev: str | None, **override: Any
          ) -> bool | None:
    """Whether the event's MAC holds after the MAC `prev` (the event before it in its chain,
    the checkpoint's, or "" at the start); None when that is not known (the event before is
    missing) and the event does not hold its own `prev`."""
    if stores_prev(event):
        return valid(ring, event, **override)
    if prev is None:
        return None
    return valid(ring, event, prev=prev, **override)


def verify_chain(ring: Ring, chain: str, events: Iterable[Mapping[str, Any]], *,
                 checkpoint: tuple[int, str] | None = None,
                 head: int | None = None, placed: bool = False) -> list[Finding]:
    """Findings for one chain. `events` are that chain's events (any order); `checkpoint` is
    (seq, mac) of the last pruned event; `head` the last sequence number the writer recorded;
    `placed`, whether the chain is marked placed (`verify_placed`). A mark that does not
    match how the events were signed (taken off a placed chain, or put on one signed before)
    is named (an edit of event `PLACED_MARK`), and the events are verified as they were signed.

    An event's `prev` is the MAC of the event before it in the chain (the first at the number
    before its own), the checkpoint's right after the checkpoint, "" at 1; events stored before
    the store left `prev` out hold their own. The MAC of an event right after a missing number,
    or right after a named one, covers a MAC that is gone or may have been changed: it is not
    checked (the finding before names the place), unless the event holds its own `prev`."""
    start = checkpoint[0] + 1 if checkpoint else 1
    by_seq: dict[int, list[Mapping[str, Any]]] = {}
    for event in events:
        by_seq.setdefault(int(event["seq"]), []).append(event)
    signed_placed = any(placed_holds(ring, e) for here in by_seq.values() for e in here)
    if placed or signed_placed:
        findings = verify_placed(ring, chain, by_seq, start=start, head=head)
        if placed and not signed_placed and _any_linked(ring, by_seq, start, checkpoint):
            # The mark was put on a chain signed before: read as it was signed.
            return [Finding("edited", chain, None, PLACED_MARK),
                    *_verify_linked(ring, chain, by_seq, start=start, head=head,
                                    checkpoint=checkpoint)]
        if not placed:  # signed at their place: the chain's mark was taken off
            findings.insert(0, Finding("edited", chain, None, PLACED_MARK))
        return findings
    return _verify_linked(ring, chain, by_seq, start=start, head=head, checkpoint=checkpoint)


def _link(by_seq: Mapping[int, list[Mapping[str, Any]]], seq: int, start: int,
          checkpoint: tuple[int, str] | None) -> str | None:
    """The MAC an event at `seq` of a chain signed before placed chains follows, as stored:
    the checkpoint's right after it, "" at 1, else the event before's; None if unknown."""
    if checkpoint is not None and seq == start:
        return checkpoint[1]
    if seq == 1:
        return ""
    before = by_seq.get(seq - 1)
    return before[0].get("mac") if before else None


def _any_linked(ring: Ring, by_seq: Mapping[int, list[Mapping[str, Any]]], start: int,
                checkpoint: tuple[int, str] | None) -> bool:
    """Whether any event holds as signed before placed chains, after the MAC before it."""
    return any(holds(ring, e, _link(by_seq, seq, start, checkpoint)) is True
               for seq, here in by_seq.items() for e in here)


def _verify_linked(ring: Ring, chain: str, by_seq: Mapping[int, list[Mapping[str, Any]]], *,
                   start: int, head: int | None,
                   checkpoint: tuple[int, str] | None) -> list[Finding]:
    """Findings for a chain signed before placed chains, each event after the MAC before it."""

    def link(seq: int) -> str | None:
        return _link(by_seq, seq, start, checkpoint)

    # Events left below the checkpoint (by a prune of a version that went by time alone, when a
    # chain runs in the order its events were linked): out of the links now, still signed, so
    # an edit of one is named too.
    findings: list[Finding] = [Finding("edited", chain, s, e.get("id"))
                               for s in sorted(by_seq) if s < start
                               for e in by_seq[s] if holds(ring, e, link(s)) is False]
    seqs = sorted(s for s in by_seq if s >= start)
    last = max([*seqs, head or 0, start - 1])
    prev_mac: str | None = checkpoint[1] if checkpoint else ""
    for seq in range(start, last + 1):
        here = by_seq.get(seq)
        if not here:
            findings.append(Finding("deleted", chain, seq, None))
            prev_mac = None
            continue
        after_finding = bool(findings) and findings[-1].seq == seq - 1
        # After a named event, an event that does not follow the MAC stored there is not named
        # for it: that MAC may be what was changed (the finding before names it).
        checked = {id(e): holds(ring, e, None if after_finding else prev_mac) for e in here}
        good = [e for e in here if checked[id(e)] is not False]
        for event in here:
            if checked[id(event)] is not False:
                continue
            if good or (len(here) > 1 and event is not here[0]):
                kind = "inserted"
            elif any(holds(ring, event, link(other), seq=other) for other in seqs
                     if other != seq):
                kind = "reordered"
            else:
                kind = "edited"
            findings.append(Finding(kind, chain, seq, event.get("id")))
        if len(good) > 1:
            findings.extend(Finding("inserted", chain, seq, e.get("id")) for e in good[1:])
        chosen = good[0] if good else here[0]
        if (good and stores_prev(chosen) and prev_mac is not None
                and chosen.get("prev") != prev_mac and not after_finding):
            findings.append(Finding("inserted", chain, seq, chosen.get("id")))
        prev_mac = chosen.get("mac")
    return findings


def placed_holds(ring: Ring, event: Mapping[str, Any], **override: Any) -> bool:
    """Whether an event of a placed chain holds (at its own place, or with `override`): its
    MAC, and no `prev` (one put on it would mislead the export and the pruner)."""
    return event.get("prev") is None and valid(ring, event, prev=None, **override)


def verify_placed(ring: Ring, chain: str, by_seq: Mapping[int, list[Mapping[str, Any]]], *,
                  start: int, head: int | None) -> list[Finding]:
    """Findings for a placed chain: `by_seq` its events by number, `start` the number after its
    checkpoint. Every number from `start` to the head or the highest present holds one event
    whose MAC holds there; each event is checked on its own, so one next to a named event is
    checked as any other."""
    findings: list[Finding] = [Finding("edited", chain, s, e.get("id"))
                               for s in sorted(by_seq) if s < start
                               for e in by_seq[s] if not placed_holds(ring, e)]
    last = max([*by_seq, head or 0, start - 1])
    for seq in range(start, last + 1):
        here = by_seq.get(seq)
        if not here:
            findings.append(Finding("deleted", chain, seq, None))
            continue
        good = [e for e in here if placed_holds(ring, e)]
        for event in here:
            if any(event is g for g in good):
                continue
            if good or event is not here[0]:
                kind = "inserted"
            elif any(placed_holds(ring, event, seq=other)
                     for other in range(start, last + 1) if other != seq):
                kind = "reordered"
            else:
                kind = "edited"
            findings.append(Finding(kind, chain, seq, event.get("id")))
        findings.extend(Finding("inserted", chain, seq, e.get("id")) for e in good[1:])
    return findings


def is_block(event: Mapping[str, Any]) -> bool:
    return event.get("kind") == BLOCK


def pins_of(ring: Ring, blocks: Iterable[Mapping[str, Any]]
            ) -> dict[str, dict[int, str]]:
    """What blocks settle: for each chain of write events, each number pinned and the MAC that
    stands there (the latest block's, by its signed time). A block whose MAC fails pins
    nothing (its own chain's verification names it)."""
    standing: dict[str, dict[int, tuple[Any, str]]] = {}
    for block in blocks:
        pins, macs = block.get("pins"), block.get("pin_macs")
        if (not is_block(block) or not isinstance(pins, list) or not isinstance(macs, list)
                or len(pins) != len(macs) or not placed_holds(ring, block)):
            continue
        at, settled = block.get("at"), standing.setdefault(str(block.get("settles")), {})
        for seq, mac in zip(pins, macs, strict=True):
            here = settled.get(seq)
            if here is None or here[0] <= at:
                settled[seq] = (at, mac)
    return {chain: {seq: mac for seq, (_, mac) in settled.items()}
            for chain, settled in standing.items()}


def verify_writes(ring: Ring, chain: str, events: Iterable[Mapping[str, Any]],
                  pins: Mapping[int, str]) -> list[Finding]:
    """Findings for a chain of write events: `pins`, each number its blocks settle with the MAC
    that stands there (`pins_of`). A pinned number with no event is a deletion; an event there
    whose MAC fails, or is not the one pinned, an edit (an older version put back, say), or a
    reordering when it holds at another pinned number; a second event at a number an
    insertion. An event no block pins is checked by its MAC and named unsettled."""
    by_seq: dict[int, list[Mapping[str, Any]]] = {}
    for event in events:
        by_seq.setdefault(int(event["seq"]), []).append(event)
    findings: list[Finding] = []
    if any(e.get("kind") != WRITE and placed_holds(ring, e)
           for here in by_seq.values() for e in here):
        findings.append(Finding("edited", chain, None, WRITES_MARK))  # put on another chain
    for seq in sorted({*pins, *by_seq}):
        here = by_seq.get(seq, [])
        mac = pins.get(seq)
        if mac is not None and not here:
            findings.append(Finding("deleted", chain, seq, None))
            continue
        good = [e for e in here if placed_holds(ring, e) and e.get("kind") == WRITE
                and (mac is None or e.get("mac") == mac)]
        for event in here:
            if any(event is g for g in good):
                continue
            if good or event is not here[0]:
                kind = "inserted"
            elif any(placed_holds(ring, event, seq=other) and event.get("mac") == pinned
                     for other, pinned in pins.items() if other != seq):
                kind = "reordered"
            else:
                kind = "edited"
            findings.append(Finding(kind, chain, seq, event.get("id")))
        findings.extend(Finding("inserted", chain, seq, e.get("id")) for e in good[1:])
        if mac is None and good:
            findings.append(Finding("unsettled", chain, seq, good[0].get("id")))
    return findings
