"""Writing the audit trail: group commits into numbered chains (docs/audit.md,
vaultgraph/audit/chain.py). Reading and verifying is services/audit_log.py, pruning
services/audit_pruner.py.

`AuditWriter` is this process's one writer. Requests hand it their event; it writes whatever
has gathered in one transaction, and only then answers them. A batch waits for company only
while requests that announced themselves (`arriving`, from the audit middleware) have yet to
hand their events over, at most `max_wait` seconds and `max_batch` events: alone, a request's
event is written at once; under load, a batch holds the events of the requests in flight, so
the write transactions (whose commit costs Neo4j more than an event does) are few. An event
that could not be written fails its request closed (503, no data). Sequence numbers are given
per batch and the writer's chain state moves on only after the batch committed; a batch that
failed, whose outcome is unknown, ends the chain, and the writer starts a new one, so a number
is never used twice.

A create's event is stored once (docs/audit.md, "Write events"): the writer gives its write a
number in one of its chains of write events, each in turn (`place`), and the write's statement
stores the event complete there, signed as the request expects to end. A request that ends so
hands its place over (`pin`); places are held back for `settle_wait` (or until a batch's
worth are), then a batch stores, in its lane's chain, a block naming each number and the MAC
that stands there (a block for each chain it settles), and writes nothing to the event. One
that ends otherwise (its write rolled back or may have, its answer not the one expected) has
its event written again at its place by the next batch (`record_placed`), and the block pins
the new MAC. A batch that fails hands its places to the next (a request it answered
503 with that answer in its event).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import secrets
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .. import metrics
from ..audit.chain import sign
from ..audit.event import BLOCK, WRITE, outcome_of
from ..crypto import KeyRing
from ..deadline import timeout_at
from ..errors import TimedOut, Unavailable, UniquenessViolation
from ..repository.audit import AuditRepository

if TYPE_CHECKING:
    from ..settings import Settings

log = logging.getLogger("vaultgraph.services.audit")


# How a batch writes an item's event: created whole and numbered in the lane's chain; linked
# (a write's statement stored it pending, or may have) and numbered; pinned (a write's statement
# stored it at its place, as it stands: the lane's block names it); or placed (written whole at
# its place, and pinned).
CREATE, LINK, PIN, PLACE = "create", "link", "pin", "place"
# (event, the request's future or None, how it is written, what a write's statement stored of it
# if known)
_Item = tuple[dict[str, Any], asyncio.Future | None, str, Mapping[str, Any] | None]
# How long a writer gives numbers in one chain of write events: the pruner takes a chain whose
# numbers all lie past the retention as a whole (services/audit_pruner.py).
WRITE_CHAIN_SPAN = timedelta(hours=1)
# New chains of write events are made this long before the current ones' span ends.
_WRITE_CHAIN_AHEAD = timedelta(minutes=1)
# A set of chains of write events opened short (some failed) is made whole again after this.
_REOPEN_AFTER = timedelta(minutes=1)
# How many batches a place is handed to before it is given up (left unsettled, which
# verification names): a store that refuses every batch must not keep one alive for ever.
_PLACE_TRIES = 3


class Arrival:
    """A request the writer expects an event from (`AuditWriter.arriving`): announced when the
    block is entered, and handed over when the request hands its event over, or when the
    block ends without it (a request cancelled first). A class, not a generator: every
    protected request enters one."""

    __slots__ = ("_writer", "waiting")

    def __init__(self, writer: AuditWriter) -> None:
        self.waiting = False
        self._writer = writer

    def __enter__(self) -> Arrival:
        self.waiting = True
        self._writer._arriving += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._writer._handed(self)


def new_chain_id() -> str:
    """A chain's id: 19 random decimal digits (62.8 bits), below 9 * 10**18 so that every event
    stores it as a 64-bit integer (audit/ids.py `chain_number`: the `(chain, seq)` index's key
    10 bytes where the digits took 22, docs/adr/0028). Ids need no more: a chain started under
    an id another chain holds is refused by its first batch (the head is not at 0) and the lane
    starts a new one."""
    return str(10**18 + secrets.randbelow(8 * 10**18))


class _Lane:
    """One chain of the writer: one batch at a time, so its sequence numbers stay in order."""

    __slots__ = ("busy", "chain", "seq")

    def __init__(self) -> None:
        metrics.AUDIT_CHAINS.inc()
        self.chain = new_chain_id()
        self.seq = 0
        self.busy = False


class _WriteChain:
    """A chain of write events: its id, the last number given, and until when it gives any."""

    __slots__ = ("chain", "seq", "until")

    def __init__(self, chain: str, until: datetime) -> None:
        self.chain = chain
        self.seq = 0
        self.until = until


class AuditWriter:
    """`lanes` chains, each with at most one batch in flight: while one lane's batch commits,
    the next batch gathers and commits on another, so requests do not all wait on one commit
    while the process idles (a lane's failure ends only its own chain)."""

    def __init__(self, repo: AuditRepository, ring: KeyRing, *, max_batch: int = 256,
                 max_wait: float = 0.002, lanes: int = 2, write_chains: int = 1,
                 settle_wait: float = 0.0):
        self._repo = repo
        self._ring = ring
        self._max_batch = max(1, max_batch)
        self._max_wait = max(0.0, max_wait)
        self._pending: list[_Item] = []
        # Places handed over as they were stored (`pin`), held back until `settle_wait` has
        # passed since the first of them or a batch's worth gathered: one block a chain then
        # settles many writes' events (docs/adr/0039).
        self._unpinned: list[_Item] = []
        self._settle_wait = max(0.0, settle_wait)
        self._pin_timer: asyncio.TimerHandle | None = None
        self._arriving = 0  # requests announced whose events are not handed over yet
        self._company = asyncio.Event()  # an event was handed over, or a request went away
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._lanes = [_Lane() for _ in range(max(1, lanes))]
        self._lane_freed = asyncio.Event()
        self._flushes: set[asyncio.Task] = set()
        self._stopping = False
        self._idle = asyncio.Event()
        self._idle.set()
        # The chains write events are placed in, in turn: writes in flight together take
        # numbers of different chains, so their places' unique entries do not all go to the
        # same end of one range (docs/performance.md, "where a tokenize's event costs Neo4j").
        self._writes: tuple[_WriteChain, ...] = ()
        self._write_chains = max(1, write_chains)
        self._turn = 0
        self._reopen_at = datetime.now(UTC)  # a set opened short is made again from then
        self._opening: asyncio.Task | None = None
        self._tries: dict[tuple[str, int], int] = {}  # batches a place was handed to, failed

    @classmethod
    def from_settings(cls, repo: AuditRepository, ring: KeyRing,
                      settings: Settings) -> AuditWriter:
        """The writer `settings` describe (`VAULTGRAPH_AUDIT_BATCH_MAX`, `_BATCH_WAIT`,
        `_LANES`, `_WRITE_CHAINS`, `_SETTLE_WAIT`)."""
        return cls(repo, ring, max_batch=settings.audit_batch_max,
                   max_wait=settings.audit_batch_wait, lanes=settings.audit_lane_count,
                   write_chains=settings.audit_write_chains,
                   settle_wait=settings.audit_settle_wait)

    @property
    def chain(self) -> str:
        """The first lane's chain: the one a request alone (no batch in flight) is written to."""
        return self._lanes[0].chain

    @property
    def chains(self) -> set[str]:
        """Every lane's current chain."""
        return {lane.chain for lane in self._lanes}

    # -- requests' side ---------------------------------------------------------------------

    def arriving(self) -> Arrival:
        """Announce a request whose event will be handed over (`record`/`record_later` with
        the arrival) before the block ends: batches wait for it rather than commit without it."""
        return Arrival(self)

    def _handed(self, arrival: Arrival | None) -> None:
        if arrival is not None and arrival.waiting:
            arrival.waiting = False
            self._arriving -= 1
            self._company.set()

    async def record(self, event: dict[str, Any], arrival: Arrival | None = None, *,
                     stored: Mapping[str, Any] | None = None,
                     within: float | None = None) -> None:
        """Returns once the event is committed; raises `errors.Unavailable` if it cannot be,
        or, with `within`, if it is not committed within that many seconds (what is left of
        the request's database budget: the request answers 503 in time, and its event is
        still written with its batch). `stored`: what a write's statement carrying the event
        stored, when it was sent but its commit was not confirmed; the event is linked by id
        if it is there and created if it is not."""
        future = asyncio.get_running_loop().create_future()
        self._enqueue((event, future, CREATE if stored is None else LINK, stored), arrival)
        await self._answered(future, within)

    @staticmethod
    async def _answered(future: asyncio.Future, within: float | None) -> None:
        if within is None:
            await future
            return
        try:
            async with timeout_at(asyncio.get_running_loop().time() + max(within, 0.0)):
                await future
        except TimeoutError:
            raise TimedOut("The audit trail was not written in time; try again shortly.",
                              retry_after=1) from None

    def record_later(self, event: dict[str, Any], arrival: Arrival | None = None, *,
                     stored: Mapping[str, Any] | None = None) -> None:
        """Link an event whose write already committed it (pending) without waiting. `stored`:
        what the write stored of it (linking writes only what differs); unknown, everything."""
        self._enqueue((event, None, LINK, stored), arrival)

    # -- write events -----------------------------------------------------------------------

    def place(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """`event` (a write's, as its request expects to end) at the next number of one of
        this writer's chains of write events (each in turn), signed there; None while none is
        open (the write then stores its event pending, as any other write's). From here on
        the number must be handed back (`pin`, `record_placed`)."""
        writes = self._writes
        now = datetime.now(UTC)
        short = len(writes) < self._write_chains and now >= self._reopen_at  # some failed
        if not writes or short or now >= writes[0].until - _WRITE_CHAIN_AHEAD:
            self._open_soon()
            if not writes or now >= writes[0].until:
                return None
        chain = writes[self._turn % len(writes)]
        self._turn += 1
        chain.seq += 1
        return self._signed_at(event, chain.chain, chain.seq, kind=WRITE)

    def replaced(self, placed: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
        """`event`, as its request ended, at the place of `placed` (signed again there)."""
        return self._signed_at(event, placed["chain"], placed["seq"], kind=placed["kind"])

    def _signed_at(self, event: Mapping[str, Any], chain: str, seq: int,
                   **fields: Any) -> dict[str, Any]:
        """`event` (with `fields`) at `seq` of `chain`, signed there under the active key
        (placed, audit/chain.py: its MAC covers its own fields, its place among them)."""
        item = {**event, **fields, "chain": chain, "seq": seq, "key_version": self._ring.active}
        item["mac"] = sign(self._ring, item)
        return item

    def pin(self, placed: dict[str, Any], arrival: Arrival | None = None) -> None:
        """A write event stored as its request ended: a block pins it once `settle_wait` has
        passed since the first place held back, or sooner when a batch's worth are (no one
        waits on it: the event is stored, and verification names it `unsettled` until then)."""
        self._unpinned.append((placed, None, PIN, None))
        self._handed(arrival)
        if (self._settle_wait <= 0 or self._stopping
                or len(self._unpinned) >= self._max_batch):
            self._release_pins()
        elif self._pin_timer is None:
            self._idle.clear()
            self._pin_timer = asyncio.get_running_loop().call_later(
                self._settle_wait, self._release_pins)

    def _release_pins(self) -> None:
        """The places held back, handed to the next batch."""
        if self._pin_timer is not None:
            self._pin_timer.cancel()
            self._pin_timer = None
        if self._unpinned:
            self._pending.extend(self._unpinned)
            self._unpinned.clear()
            self._woken()

    async def record_placed(self, event: dict[str, Any], arrival: Arrival | None = None, *,
                            within: float | None = None, wait: bool = True) -> None:
        """A write event (`replaced`) written again at its place by the next batch, and pinned;
        as `record` (with `wait`), or without waiting (its write committed: the request's
        event is there, as it was expected)."""
        if not wait:
            self._enqueue((event, None, PLACE, None), arrival)
            return
        future = asyncio.get_running_loop().create_future()
        self._enqueue((event, future, PLACE, None), arrival)
        await self._answered(future, within)

    def record_unanswered(self, event: dict[str, Any], arrival: Arrival | None = None, *,
                          placed: dict[str, Any] | None = None,
                          stored: Mapping[str, Any] | None = None) -> None:
        """The event of a request that ended unanswered (cancelled), written by the next batch
        with no one waiting: at its write's place (`placed`, where the batch waits for a write
        still running), linked (`stored`: its write was sent, and committed or not), or
        created (no write was sent)."""
        if placed is not None:
            self._enqueue((self.replaced(placed, event), None, PLACE, None), arrival)
        else:
            self._enqueue((event, None, CREATE if stored is None else LINK, stored), arrival)

    async def open_writes(self) -> bool:
        """Open the chains of write events now, unless they are open; whether any is."""
        if not self._writes:
            self._open_soon()
            await asyncio.shield(self._opening)
        return bool(self._writes)

    def _open_soon(self) -> None:
        if self._opening is None or self._opening.done():
            self._opening = asyncio.get_running_loop().create_task(
                self._open_write_chain(), name="audit-write-chain",
                context=contextvars.Context())

    async def _open_write_chain(self) -> None:
        """Make the next chains of write events, all until the same time. A failure leaves
        write events on the pending path until a later write tries again; with some chains
        made before it, they are placed in those, and a whole set is made again a minute later."""
        until = datetime.now(UTC) + WRITE_CHAIN_SPAN
        opened: list[_WriteChain] = []
        try:
            while len(opened) < self._write_chains:
                opened.append(await self._new_write_chain(until))
        except Exception as exc:
            self._reopen_at = datetime.now(UTC) + _REOPEN_AFTER
            log.warning("audit write chains not all opened; writes are placed in those that "
                        "were, or keep their events pending if none was",
                        extra={"error": type(exc).__name__, "opened": len(opened),
                               "wanted": self._write_chains})
        if opened:
            self._writes = tuple(opened)

    async def _new_write_chain(self, until: datetime) -> _WriteChain:
        """One chain of write events; on a colliding id, another (three tries)."""
        for attempt in range(3):
            chain = new_chain_id()
            try:
                await self._repo.open_write_chain(chain, until)
                break
            except UniquenessViolation:
                if attempt == 2:
                    raise
        metrics.AUDIT_CHAINS.inc()
        return _WriteChain(chain, until)

    def _enqueue(self, item: _Item, arrival: Arrival | None) -> None:
        self._pending.append(item)
        self._handed(arrival)
        self._woken()

    def _woken(self) -> None:
        """Something is pending: the writer's task runs (started if it is not)."""
        self._idle.clear()
        self._wake.set()
        if self._stopping:
            return  # stop() writes what is pending until it is done
        if self._task is None or self._task.done():
            # A context of its own: a task started from a request's would carry the request's
            # audit note into every batch, whose statement would then store that event again.
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="audit-writer", context=contextvars.Context())

    # -- the writer -------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                lane = await self._free_lane()
                await self._gather()
                self._start_flush(lane)
            self._check_idle()

    def _start_flush(self, lane: _Lane) -> None:
        """The next batch of what is pending, written on `lane` (which is busy until then)."""
        batch = self._pending[:self._max_batch]
        del self._pending[:self._max_batch]
        lane.busy = True
        flush = asyncio.get_running_loop().create_task(self._flush(lane, batch))
        self._flushes.add(flush)
        flush.add_done_callback(self._flushes.discard)

    def _idle_lane(self) -> _Lane | None:
        return next((lane for lane in self._lanes if not lane.busy), None)

    async def _free_lane(self) -> _Lane:
        while (lane := self._idle_lane()) is None:
            self._lane_freed.clear()
            await self._lane_freed.wait()
        return lane

    def _check_idle(self) -> None:
        if (not self._pending and not self._unpinned
                and not any(lane.busy for lane in self._lanes)):
            self._idle.set()

    async def _gather(self) -> None:
        """Wait for the announced requests' events, while the batch has room and `max_wait`
        allows."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self._max_wait
        while self._arriving > 0 and len(self._pending) < self._max_batch:
            left = until - loop.time()
            if left <= 0:
                return
            self._company.clear()
            try:
                # A window of milliseconds, not a budget: its own timer, so the shared one
                # is not re-armed for each batch (deadline.timeout_at).
                async with asyncio.timeout_at(until):
                    await self._company.wait()
            except TimeoutError:
                return

    async def _flush(self, lane: _Lane, batch: list[_Item]) -> None:
        """Write `batch` on `lane`; the lane moves on only once it committed."""
        try:
            await self._write(lane, batch)
        finally:
            lane.busy = False
            self._lane_freed.set()
            self._check_idle()

    async def _write(self, lane: _Lane, batch: list[_Item]) -> None:
        seq = lane.seq
        try:
            created: list[dict[str, Any]] = []
            linked: list[tuple[dict[str, Any], Mapping[str, Any]]] = []
            placed: list[dict[str, Any]] = []
            pins: dict[str, list[dict[str, Any]]] = {}  # write events settled, by their chain
            for event, _, mode, stored in batch:
                if mode == PIN or mode == PLACE:
                    pins.setdefault(event["chain"], []).append(event)
                    if mode == PLACE:
                        placed.append(event)
                    continue
                seq += 1
                item = self._signed_at(event, lane.chain, seq)
                if mode == LINK:
                    linked.append((item, stored))
                else:
                    created.append(item)
            blocks = []
            for chain, settled in pins.items():
                seq += 1
                blocks.append(self._block(lane.chain, seq, chain, settled))
            began = time.perf_counter()
            await self._repo.write_batch(created, linked, chain=lane.chain, head_seq=seq,
                                         blocks=blocks, placed=placed)
            took = time.perf_counter() - began
        except BaseException as exc:  # cancelled too: the commit's outcome is unknown
            metrics.AUDIT_FAILURES.inc()
            log.warning("audit batch not written; its requests fail closed",
                        extra={"error": type(exc).__name__, "events": len(batch)})
            self._lanes[self._lanes.index(lane)] = _Lane()  # a new chain for this lane
            self._hand_on(batch)
            for _, future, _, _ in batch:
                if future is not None and not future.done():
                    future.set_exception(Unavailable("The audit trail cannot be written; "
                                                     "try again shortly."))
            if not isinstance(exc, Exception):
                raise
            return
        lane.seq = seq
        for event, _, mode, _ in batch:
            if mode == PIN or mode == PLACE:
                self._tries.pop((event["chain"], event["seq"]), None)
        metrics.AUDIT_BATCHES.inc()
        metrics.AUDIT_EVENTS.inc(len(batch))
        metrics.AUDIT_BATCH_SIZE.observe(len(batch))
        metrics.AUDIT_COMMIT.observe(took)
        for _, future, _, _ in batch:
            if future is not None and not future.done():
                future.set_result(None)

    def _block(self, lane_chain: str, seq: int, chain: str,
               settled: list[dict[str, Any]]) -> dict[str, Any]:
        """A block at `seq` of a lane's chain: it settles the write events `settled` of `chain`
        (each number once, the last version handed over standing)."""
        macs = {event["seq"]: event["mac"] for event in settled}
        return self._signed_at({"id": str(uuid.uuid4()), "at": datetime.now(UTC),
                                "token_ids": []}, lane_chain, seq, kind=BLOCK, settles=chain,
                               pins=list(macs), pin_macs=list(macs.values()))

    def _hand_on(self, batch: list[_Item]) -> None:
        """The places of a batch that failed, handed to the next: the block that settles them
        may not have been stored. A request about to be answered 503 has that answer written
        at its place (its event signed again)."""
        again: list[_Item] = []
        for event, future, mode, _ in batch:
            if mode != PIN and mode != PLACE:
                continue
            place = (event["chain"], event["seq"])
            tries = self._tries[place] = self._tries.get(place, 0) + 1
            if tries >= _PLACE_TRIES:
                self._tries.pop(place, None)
                log.warning("audit write event left unsettled after failed batches",
                            extra={"tries": tries})
                continue
            if future is not None and not future.done():
                event = self.replaced(event, {**event, "status": 503,
                                              "outcome": outcome_of(503)})
                mode = PLACE
            again.append((event, None, mode, None))
        if again:
            self._pending[:0] = again
            self._woken()

    async def settle(self) -> None:
        """Wait until every event handed over so far is written (or failed), the places held
        back for a block settled too."""
        self._release_pins()
        if self._pending or any(lane.busy for lane in self._lanes):
            await self._idle.wait()

    async def stop(self) -> None:
        """End the task, then write what is pending and what arrives meanwhile (a sweep that
        is still running, say) until nothing is left: batches in flight are waited for, never
        cancelled, and each lane still writes one batch at a time."""
        self._stopping = True
        self._release_pins()
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opening
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        while self._pending or self._flushes:
            while self._pending and (lane := self._idle_lane()) is not None:
                self._start_flush(lane)
            if self._flushes:
                await asyncio.wait(set(self._flushes))
        self._stopping = False
