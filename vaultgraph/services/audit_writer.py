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
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import metrics
from ..audit.chain import sign
from ..crypto import KeyRing
from ..errors import Unavailable
from ..repository.audit import AuditRepository

if TYPE_CHECKING:
    from ..settings import Settings

log = logging.getLogger("vaultgraph.services.audit")


# (event, the request's future or None, whether a write's statement stored it or may have, what
# that statement stored of it if known)
_Item = tuple[dict[str, Any], asyncio.Future | None, bool, Mapping[str, Any] | None]


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


class AuditWriter:
    """`lanes` chains, each with at most one batch in flight: while one lane's batch commits,
    the next batch gathers and commits on another, so requests do not all wait on one commit
    while the process idles (a lane's failure ends only its own chain)."""

    def __init__(self, repo: AuditRepository, ring: KeyRing, *, max_batch: int = 256,
                 max_wait: float = 0.002, lanes: int = 2):
        self._repo = repo
        self._ring = ring
        self._max_batch = max(1, max_batch)
        self._max_wait = max(0.0, max_wait)
        self._pending: list[_Item] = []
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

    @classmethod
    def from_settings(cls, repo: AuditRepository, ring: KeyRing,
                      settings: Settings) -> AuditWriter:
        """The writer `settings` describe (`VAULTGRAPH_AUDIT_BATCH_MAX`, `_BATCH_WAIT`,
        `_LANES`)."""
        return cls(repo, ring, max_batch=settings.audit_batch_max,
                   max_wait=settings.audit_batch_wait, lanes=settings.audit_lane_count)

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
        self._enqueue((event, future, stored is not None, stored), arrival)
        if within is None:
            await future
            return
        try:
            async with asyncio.timeout(max(within, 0.0)):
                await future
        except TimeoutError:
            raise Unavailable("The audit trail was not written in time; try again shortly.",
                              retry_after=1) from None

    def record_later(self, event: dict[str, Any], arrival: Arrival | None = None, *,
                     stored: Mapping[str, Any] | None = None) -> None:
        """Link an event whose write already committed it (pending) without waiting. `stored`:
        what the write stored of it (linking writes only what differs); unknown, everything."""
        self._enqueue((event, None, True, stored), arrival)

    def _enqueue(self, item: _Item, arrival: Arrival | None) -> None:
        self._pending.append(item)
        self._handed(arrival)
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
        if not self._pending and not any(lane.busy for lane in self._lanes):
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
                async with asyncio.timeout(left):
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
            for event, _, was_stored, stored in batch:
                seq += 1
                # Placed (audit/chain.py): its MAC covers its own fields, its place among them.
                item = {**event, "chain": lane.chain, "seq": seq,
                        "key_version": self._ring.active}
                item["mac"] = sign(self._ring, item)
                if was_stored:
                    linked.append((item, stored))
                else:
                    created.append(item)
            began = time.perf_counter()
            await self._repo.write_batch(created, linked, chain=lane.chain, head_seq=seq)
            took = time.perf_counter() - began
        except BaseException as exc:  # cancelled too: the commit's outcome is unknown
            metrics.AUDIT_FAILURES.inc()
            log.warning("audit batch not written; its requests fail closed",
                        extra={"error": type(exc).__name__, "events": len(batch)})
            self._lanes[self._lanes.index(lane)] = _Lane()  # a new chain for this lane
            for _, future, _, _ in batch:
                if future is not None and not future.done():
                    future.set_exception(Unavailable("The audit trail cannot be written; "
                                                     "try again shortly."))
            if not isinstance(exc, Exception):
                raise
            return
        lane.seq = seq
        metrics.AUDIT_BATCHES.inc()
        metrics.AUDIT_EVENTS.inc(len(batch))
        metrics.AUDIT_BATCH_SIZE.observe(len(batch))
        metrics.AUDIT_COMMIT.observe(took)
        for _, future, _, _ in batch:
            if future is not None and not future.done():
                future.set_result(None)

    async def settle(self) -> None:
        """Wait until every event handed over so far is written (or failed)."""
        if self._pending or any(lane.busy for lane in self._lanes):
            await self._idle.wait()

    async def stop(self) -> None:
        """End the task, then write what is pending and what arrives meanwhile (a sweep that
        is still running, say) until nothing is left: batches in flight are waited for, never
        cancelled, and each lane still writes one batch at a time."""
        self._stopping = True
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
