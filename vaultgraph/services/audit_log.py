"""Reading the audit trail: pages for GET /logs, verification of every chain (docs/audit.md,
vaultgraph/audit/chain.py) and export. The writer is services/audit_writer.py, pruning
services/audit_pruner.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from ..audit.chain import WRITES_MARK, Finding, is_block, pins_of, verify_chain, verify_writes
from ..audit.event import WRITE
from ..audit.query import LogFilter
from ..crypto import CryptoError, KeyRing
from ..errors import NotFound
from ..repository.audit import AuditRepository

# What GET /logs shows of an event: never the chain's internals.
SHOWN = ("id", "at", "tenant_id", "application_id", "key_id", "operation", "route", "token_ids",
         "outcome", "status", "transform", "transform_counts", "trace_id", "client_ip",
         "user_agent", "reason")


class AuditLog:
    """Reading, verifying and exporting the trail."""

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
        event named, every write event no block settles, and every event that belongs to no
        chain."""
        if self._ring is None:
            raise ValueError("verifying the audit trail needs the key-encryption key ring")
        findings: list[Finding] = []
        infos = await self._repo.chains()
        unknown = sorted((chains or set()) - {info.chain for info in infos})
        if unknown:  # a chain named but absent would otherwise "verify" with nothing checked
            raise NotFound(f"No audit chain {', '.join(unknown)}.")
        blocks: list[dict[str, Any]] = []
        pins: dict[str, dict[int, str]] | None = None
        # The lanes' chains first: their blocks say which write events stand.
        for info in sorted(infos, key=lambda info: info.writes):
            if chains is not None and info.chain not in chains:
                continue
            events = []
            async for event in self._repo.chain_events(info.chain):
                events.append(event)
                progress(1)
            if info.writes:
                if chains is not None:  # only some chains read: the blocks by their index
                    pins = pins_of(self._ring, await self._repo.blocks(info.chain))
                elif pins is None:
                    pins = pins_of(self._ring, blocks)
                findings.extend(verify_writes(self._ring, info.chain, events,
                                              pins.get(info.chain, {})))
                continue
            checkpoint = info.checkpoint
            if checkpoint is not None and not self._checkpoint_ok(info.chain, checkpoint,
                                                                  info.checkpoint_sig):
                findings.append(Finding("edited", info.chain, checkpoint[0], "checkpoint"))
            if any(e.get("kind") == WRITE for e in events):  # its `writes` mark taken off
                findings.append(Finding("edited", info.chain, None, WRITES_MARK))
            blocks.extend(e for e in events if is_block(e))
            findings.extend(verify_chain(self._ring, info.chain, events,
                                         checkpoint=checkpoint, head=info.head,
                                         placed=info.placed))
        if chains is None:
            # Write events settled in a chain that is gone (its node deleted).
            known = {info.chain for info in infos if info.writes}
            findings.extend(Finding("deleted", chain, seq, None)
                            for chain, settled in sorted(pins_of(self._ring, blocks).items())
                            if chain not in known for seq in sorted(settled))
            findings.extend(Finding("unlinked", None, None, event_id)
                            for event_id in await self._repo.unchained())
        return findings

    def checkpoint_sig(self, chain: str, seq: int, mac: str) -> str:
        return checkpoint_sig(self._ring, chain, seq, mac)

    def _checkpoint_ok(self, chain: str, checkpoint: tuple[int, str], sig: str | None) -> bool:
        try:
            return sig == self.checkpoint_sig(chain, *checkpoint)
        except CryptoError:
            return False

    def export(self, since: datetime, until: datetime) -> AsyncIterator[dict[str, Any]]:
        return self._repo.export(since=since, until=until)


def present(event: dict[str, Any]) -> dict[str, Any]:
    out = {k: event.get(k) for k in SHOWN}
    at = out["at"]
    if isinstance(at, datetime):
        out["at"] = at.astimezone(UTC).isoformat()
    return out


def checkpoint_sig(ring: KeyRing, chain: str, seq: int, mac: str) -> str:
    """The signature of a chain's checkpoint (its last pruned event's number and MAC)."""
    return ring.audit_mac(f"checkpoint|{chain}|{seq}|{mac}".encode())
