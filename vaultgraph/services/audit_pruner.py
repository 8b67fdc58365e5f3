"""Pruning the audit trail past its retention, leaving each chain verifiable
(docs/audit.md, "Retention"): `AuditPruner.prune_before` and the pass it runs every interval."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..audit.chain import placed_holds, stores_prev, valid
from ..audit.event import WRITE
from ..crypto import KeyRing
from ..repository.audit import BEGINNING, AuditRepository, ChainInfo, native
from .audit_log import signed_checkpoint
from .audit_writer import WRITE_CHAIN_SPAN

log = logging.getLogger("vaultgraph.services.audit")

# How far apart a write event's time (its request's arrival) and the time of the block that
# settles it may lie, at the most: a request's budget and a few batches are seconds.
_SKEW = timedelta(hours=1)
# How far behind the pruner's clock a writer's may run, at the most, for the pruner to take a
# chain of write events as ended by its `until` (set by the writer's clock).
_CLOCK_SKEW = timedelta(hours=1)
# Deletes events and moves checkpoints (`AuditRepository.prune`), in one transaction.
_Delete = Callable[[list[Mapping[str, Any]], list[dict[str, Any]]], Awaitable[int]]


class AuditPruner:
    """Prunes past `VAULTGRAPH_AUDIT_RETENTION_DAYS` every `interval` seconds (like the expiry
    sweeper: one guarded pass at a time; every replica may run one): events older than the
    retention go, a batch per transaction, leaving a signed checkpoint per chain so what
    remains still verifies."""

    def __init__(self, repo: AuditRepository, ring: KeyRing | None, *, retention_days: float,
                 interval: float):
        self._repo = repo
        self._ring = ring
        self._days = retention_days
        self._interval = interval
        self._lock = asyncio.Lock()
        self._task: asyncio.Task | None = None

    def cutoff(self) -> datetime:
        """The time before which events are past the retention."""
        return datetime.now(UTC) - timedelta(days=self._days)

    async def prune(self) -> int:
        async with self._lock:
            started = time.perf_counter()
            pruned = await self.prune_before(self.cutoff())
        log.info("audit prune", extra={"pruned": pruned,
                                       "ms": round((time.perf_counter() - started) * 1000, 2)})
        return pruned

    async def prune_before(self, cutoff: datetime, batch: int = 1000,
                           progress: Callable[[int], None] = lambda n: None) -> int:
        """Delete events older than `cutoff` (`progress` is given the number each transaction
        deleted, as it commits). Each chain loses only what continues it from its
        checkpoint, lowest `seq` first, up to its first event at or after the cutoff (a chain
        runs in link order, which differs from time order by the requests in flight together),
        and its checkpoint moves to the last one deleted: nothing of a chain stays below its
        checkpoint, so a deletion anywhere is named by `verify`. A chain is pruned up to an event
        that does not continue it (a number missing or taken twice, a link or MAC that does
        not hold: tampering), never past it. Then a chain of write events whose hour began before
        the cutoff loses each event past the retention that no block still stored names (the
        blocks pruned above released theirs: `_prune_writes`), and one emptied past the
        retention is deleted (`_retire_write_chains`). Then events out of every chain's order
        (below a checkpoint, never linked, in no known chain) go by time alone."""
        pruned, cutoff, batch = 0, native(cutoff), max(1, batch)
        delete = self._deleter(progress)
        infos = await self._repo.chains()
        for info in infos:
            done = info.checkpoint[0] if info.checkpoint else 0
            if not info.writes and info.head is not None and info.head > done:
                pruned += await self._prune_chain(delete, info.chain, cutoff, batch)
        for info in infos:
            # A chain of write events holding any event past the retention: its hour began
            # before the cutoff (one whose hour ends after it keeps its later events). One that
            # holds none any more is not read again: each pass would read more of them.
            if (info.writes and info.holds and info.until is not None
                    and info.until - WRITE_CHAIN_SPAN <= cutoff):
                pruned += await self._prune_writes(delete, info.chain, cutoff, batch)
        await self._retire_write_chains(infos, cutoff)
        return pruned + await self._prune_leftovers(delete, cutoff, batch)

    def _deleter(self, progress: Callable[[int], None]) -> _Delete:
        """The repository's prune, each transaction's count handed to `progress`."""

        async def delete(events: list[Mapping[str, Any]], checkpoints: list[dict[str, Any]]
                         ) -> int:
            pruned = await self._repo.prune(events, checkpoints)
            progress(pruned)
            return pruned

        return delete

    async def _retire_write_chains(self, infos: list[ChainInfo], cutoff: datetime) -> None:
        """Delete the chains of write events whose numbers all lie past the retention and that
        hold nothing any more: a process opens several an hour, and each pass lists every
        chain. Only one whose hour ended before the cutoff and an hour before now: its writer,
        unless its clock runs an hour behind this one's, gives none of its numbers again."""
        before = min(cutoff, datetime.now(UTC) - _CLOCK_SKEW)
        ended = [info.chain for info in infos
                 if info.writes and info.until is not None and info.until <= before]
        retired = await self._repo.retire_write_chains(ended, before)
        if retired:
            log.info("audit write chains retired", extra={"chains": retired})

    async def _prune_writes(self, delete: _Delete, chain: str, cutoff: datetime, batch: int
                            ) -> int:
        """A chain of write events: each event past the retention that no stored block names,
        its MAC holding at its place, goes. One a block still pins stays until that block is
        pruned (a lane's prune stopped at a finding keeps what its blocks pin: verification
        still checks them); one whose MAC fails stays for verification to name."""
        # Every number a stored block names, its MAC holding or not: an edited block is named
        # by its own chain's verification, and what it pins stays for that. A block is stored
        # within seconds of the events it settles (a batch that fails hands them to the next),
        # so those stored well past the cutoff name none this prune may take.
        pins = await self._repo.block_pins(chain, cutoff + _SKEW)
        pruned, gone = 0, []
        async for event in self._repo.chain_events(chain):
            at = event.get("at")
            if isinstance(at, datetime) and at >= cutoff + _SKEW:
                break  # numbers follow the writes' order: none past here is old enough
            if (event["seq"] in pins or event.get("kind") != WRITE
                    or not isinstance(at, datetime) or at >= cutoff
                    or not placed_holds(self._ring, event)):
                continue
            gone.append({k: event[k] for k in ("id", "chain", "seq")})
            if len(gone) >= batch:
                pruned += await delete(gone, [])
                gone = []
        if gone:
            pruned += await delete(gone, [])
        return pruned

    async def _prune_chain(self, delete: _Delete, chain: str, cutoff: datetime, batch: int
                           ) -> int:
        pruned, reread = 0, False
        while True:
            # One event more than a batch: a second event at the batch's last number shows.
            (done, prev), placed, rows = await self._repo.prune_prefix(chain, batch + 1)
            prefix: list[dict[str, Any]] = []
            defect = None
            for i, row in enumerate(rows[:batch]):
                if row.get("id") is None:  # deleted by another prune while read: it goes on
                    break
                following = rows[i + 1] if i + 1 < len(rows) else None
                defect = self._out_of_chain(row, done + len(prefix) + 1,
                                            None if placed else prev, following)
                if defect is not None or row["at"] >= cutoff:
                    break
                prefix.append(row)
                prev = row["mac"]
            if prefix:
                top = prefix[-1]
                checkpoint = signed_checkpoint(self._ring, chain, top["seq"], top["mac"])
                pruned += await delete(
                    [{k: r[k] for k in ("id", "chain", "seq")} for r in prefix], [checkpoint])
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

    def _out_of_chain(self, row: Mapping[str, Any], seq: int, prev: str | None,
                      following: Mapping[str, Any] | None) -> str | None:
        """Why an event does not continue its chain at `seq` after the MAC `prev` (None: a
        placed chain's, which holds at its own place, audit/chain.py), or None."""
        if row.get("seq") != seq:
            return "gap"
        if following is not None and following.get("seq") == seq:
            return "two events at one number"
        # An event stored with its `prev` (by an earlier version) must name the MAC before it;
        # one stored without it is signed over that MAC, so its MAC holding links it.
        if not isinstance(row.get("at"), datetime) or (stores_prev(row) and row["prev"] != prev):
            return "not linked to the event before"
        if not valid(self._ring, row, prev=prev):
            return "MAC does not hold"
        return None

    async def _prune_leftovers(self, delete: _Delete, cutoff: datetime, batch: int) -> int:
        pruned, after = 0, (BEGINNING, "")
        while True:
            rows = await self._repo.prune_leftovers(cutoff, after, batch)
            strays = [r for r in rows if r["out_of_order"] and r["id"] is not None]
            if strays:
                pruned += await delete(strays, [])
            # The page's last event still there (one another prune deleted reads as nulls).
            last = next((r for r in reversed(rows) if r["id"] is not None), None)
            if len(rows) < batch or last is None:
                return pruned
            after = (last["at"], last["id"])

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
