"""The audit trail's use cases: group-commit writing into hash chains, reading, verifying,
exporting and pruning (README "Audit", vaultgraph/audit/chain.py).

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
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from .. import metrics
from ..audit.chain import Finding, sign, valid, verify_chain
from ..audit.query import LogFilter
from ..crypto import CryptoError, KeyRing
from ..errors import NotFound, Unavailable
from ..repository.audit import BEGINNING, AuditRepository, native

log = logging.getLogger(__name__)

# What GET /logs shows of an event: never the chain's internals.
SHOWN = ("id", "at", "tenant_id", "application_id", "key_id", "operation", "route", "token_ids",
         "outcome", "status", "transform", "transform_counts", "trace_id", "client_ip",
         "user_agent", "reason")


# (event, the request's future or None, whether a write's statement stored it or may have, what
# that statement stored of it if known)
_Item = tuple[dict[str, Any], asyncio.Future | None, bool, Mapping[str, Any] | None]


class Arrival:
    """A request the writer expects an event from (`AuditWriter.arriving`)."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = True


class _Lane:
    """One chain of the writer: one batch at a time, so its sequence numbers stay in order."""

    __slots__ = ("busy", "chain", "prev", "seq")

    def __init__(self) -> None:
        metrics.AUDIT_CHAINS.inc()
        self.chain = str(uuid.uuid4())
        self.seq = 0
        self.prev = ""
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

    @property
    def chain(self) -> str:
        """The first lane's chain: the one a request alone (no batch in flight) is written to."""
        return self._lanes[0].chain

    @property
    def chains(self) -> set[str]:
        """Every lane's current chain."""
        return {lane.chain for lane in self._lanes}

    # -- requests' side ---------------------------------------------------------------------

    @contextlib.contextmanager
    def arriving(self) -> Iterator[Arrival]:
        """Announce a request whose event will be handed over (`record`/`record_later` with
        the arrival) before the block ends: batches wait for it rather than commit without it."""
        arrival = Arrival()
        self._arriving += 1
        try:
            yield arrival
        finally:
            self._handed(arrival)  # a request that left without an event (cancelled)

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
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                name="audit-writer")

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
        seq, prev = lane.seq, lane.prev
        try:
            created: list[dict[str, Any]] = []
            linked: list[tuple[dict[str, Any], Mapping[str, Any]]] = []
            for event, _, was_stored, stored in batch:
                seq += 1
                item = {**event, "chain": lane.chain, "seq": seq, "prev": prev,
                        "key_version": self._ring.active}
                item["mac"] = prev = sign(self._ring, item)
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
        lane.seq, lane.prev = seq, prev
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


class AuditLog:
    """Reading, verifying, exporting and pruning the trail."""

    def __init__(self, repo: AuditRepository, ring: KeyRing | None):
        self._repo = repo
        self._ring = ring

    async def page(self, tenant_id: str, where: LogFilter, size: int,
                   after: tuple[datetime, str] | None) -> tuple[list[dict], tuple | None]:
        before = after or (datetime(9999, 12, 31, tzinfo=UTC), "\U0010ffff")
        rows = await self._repo.page(tenant_id=tenant_id, where=where, before=before,
                                     limit=size + 1)
        shown = rows[:size]
        more = len(rows) > size
        return [present(e) for e in shown], ((shown[-1]["at"], shown[-1]["id"])
                                             if more else None)

    async def verify(self, progress: Callable[[int], None] = lambda n: None, *,
                     chains: set[str] | None = None) -> list[Finding]:
        """Every chain checked (or those named); each edited, deleted, inserted or reordered
        event named, and every event that belongs to no chain."""
        if self._ring is None:
            raise ValueError("verifying the audit trail needs the key-encryption key ring")
        findings: list[Finding] = []
        infos = await self._repo.chains()
        unknown = sorted((chains or set()) - {info.chain for info in infos})
        if unknown:  # a chain named but absent would otherwise "verify" with nothing checked
            raise NotFound(f"No audit chain {', '.join(unknown)}.")
        for info in infos:
            if chains is not None and info.chain not in chains:
                continue
            checkpoint = info.checkpoint
            if checkpoint is not None and not self._checkpoint_ok(info.chain, checkpoint,
                                                                  info.checkpoint_sig):
                findings.append(Finding("edited", info.chain, checkpoint[0], "checkpoint"))
            events = []
            async for event in self._repo.chain_events(info.chain):
                events.append(event)
                progress(1)
            findings.extend(verify_chain(self._ring, info.chain, events,
                                         checkpoint=checkpoint, head=info.head))
        if chains is None:
            findings.extend(Finding("unlinked", None, None, event_id)
                            for event_id in await self._repo.unchained())
        return findings

    def checkpoint_sig(self, chain: str, seq: int, mac: str) -> str:
        return self._ring.audit_mac(f"checkpoint|{chain}|{seq}|{mac}".encode())

    def _checkpoint_ok(self, chain: str, checkpoint: tuple[int, str], sig: str | None) -> bool:
        try:
            return sig == self.checkpoint_sig(chain, *checkpoint)
        except CryptoError:
            return False

    def export(self, since: datetime, until: datetime) -> AsyncIterator[dict[str, Any]]:
        return self._repo.export(since=since, until=until)

    async def prune(self, retention_days: float, batch: int = 1000) -> int:
        """Delete events older than the retention, a batch per transaction, leaving a signed
        checkpoint per chain so what remains still verifies."""
        return await self.prune_before(datetime.now(UTC) - timedelta(days=retention_days),
                                       batch)

    async def prune_before(self, cutoff: datetime, batch: int = 1000) -> int:
        """Delete events older than `cutoff`. Each chain loses only what continues it from its
        checkpoint, lowest `seq` first, up to its first event at or after the cutoff (a chain
        runs in link order, which differs from time order by the requests in flight together),
        and its checkpoint moves to the last one deleted: nothing of a chain stays below its
        checkpoint, so a deletion anywhere is named by `verify`. A chain is pruned up to an event
        that does not continue it (a number missing or taken twice, a link or MAC that does
        not hold: tampering), never past it. Then events out of every chain's order (below a
        checkpoint, never linked, in no known chain) go by time alone."""
        pruned, cutoff, batch = 0, native(cutoff), max(1, batch)
        for info in await self._repo.chains():
            done = info.checkpoint[0] if info.checkpoint else 0
            if info.head is not None and info.head > done:
                pruned += await self._prune_chain(info.chain, cutoff, batch)
        return pruned + await self._prune_leftovers(cutoff, batch)

    async def _prune_chain(self, chain: str, cutoff: datetime, batch: int) -> int:
        pruned, reread = 0, False
        while True:
            # One event more than a batch: a second event at the batch's last number shows.
            (done, prev), rows = await self._repo.prune_prefix(chain, batch + 1)
            prefix: list[dict[str, Any]] = []
            defect = None
            for i, row in enumerate(rows[:batch]):
                if row.get("id") is None:  # deleted by another prune while read: it goes on
                    break
                following = rows[i + 1] if i + 1 < len(rows) else None
                defect = self._out_of_chain(row, done + len(prefix) + 1, prev, following)
                if defect is not None or row["at"] >= cutoff:
                    break
                prefix.append(row)
                prev = row["mac"]
            if prefix:
                top = prefix[-1]
                checkpoint = {"chain": chain, "seq": top["seq"], "mac": top["mac"],
                              "sig": self.checkpoint_sig(chain, top["seq"], top["mac"])}
                pruned += await self._repo.prune([r["id"] for r in prefix], [checkpoint])
                reread = False
                if defect is None and len(prefix) < batch:
                    return pruned
            elif defect is None:
                return pruned
            elif reread:
                log.warning("audit chain not pruned past an event that does not continue it "
                            "(run `vaultgraph audit verify`)",
                            extra={"chain": chain, "seq": done + 1, "defect": defect})
                return pruned
            else:  # another prune may have moved the checkpoint meanwhile: look once more
                reread = True

    def _out_of_chain(self, row: Mapping[str, Any], seq: int, prev: str,
                      following: Mapping[str, Any] | None) -> str | None:
        """Why an event does not continue its chain at `seq` after the MAC `prev`, or None."""
        if row.get("seq") != seq:
            return "gap"
        if following is not None and following.get("seq") == seq:
            return "two events at one number"
        if not isinstance(row.get("at"), datetime) or row.get("prev") != prev:
            return "not linked to the event before"
        if not valid(self._ring, row):
            return "MAC does not hold"
        return None

    async def _prune_leftovers(self, cutoff: datetime, batch: int) -> int:
        pruned, after = 0, (BEGINNING, "")
        while True:
            rows = await self._repo.prune_leftovers(cutoff, after, batch)
            ids = [r["id"] for r in rows if r["out_of_order"] and r["id"] is not None]
            if ids:
                pruned += await self._repo.prune(ids, [])
            # The page's last event still there (one another prune deleted reads as nulls).
            last = next((r for r in reversed(rows) if r["id"] is not None), None)
            if len(rows) < batch or last is None:
                return pruned
            after = (last["at"], last["id"])


def present(event: dict[str, Any]) -> dict[str, Any]:
    out = {k: event.get(k) for k in SHOWN}
    at = out["at"]
    if isinstance(at, datetime):
        out["at"] = at.astimezone(UTC).isoformat()
    return out


class AuditPruner:
    """Prunes past `VAULTGRAPH_AUDIT_RETENTION_DAYS` every `interval` seconds (like the expiry
    sweeper: one guarded pass at a time; every replica may run one)."""

    def __init__(self, audit_log: AuditLog, *, retention_days: float, interval: float):
        self._log = audit_log
        self._days = retention_days
        self._interval = interval
        self._lock = asyncio.Lock()
        self._task: asyncio.Task | None = None

    async def prune(self) -> int:
        async with self._lock:
            started = time.perf_counter()
            pruned = await self._log.prune(self._days)
        log.info("audit prune", extra={"pruned": pruned,
                                       "ms": round((time.perf_counter() - started) * 1000, 2)})
        return pruned

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.prune()
            except Exception as exc:
                log.warning("audit prune failed; trying again at the next interval",
                            extra={"error": type(exc).__name__})

    def start(self) -> None:
        if self._interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(), name="audit-pruner")

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
