"""Reading the audit trail: pages for GET /logs, verification of every chain (docs/audit.md,
vaultgraph/audit/chain.py) and export. The writer is services/audit_writer.py, pruning
services/audit_pruner.py."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from ..audit.chain import (
    SIGNED_KINDS,
    WRITES_MARK,
    Finding,
    KeyCheck,
    KeyProblem,
    Ring,
    is_block,
    pins_of,
    verify_chain,
    verify_writes,
)
from ..audit.event import WRITE
from ..audit.query import LogFilter
from ..crypto import CryptoError, KeyRing
from ..errors import NotFound
from ..repository.audit import AuditRepository, ChainInfo

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
                     chains: set[str] | None = None) -> list[Finding | KeyProblem]:
        """Every chain checked (or those named); each edited, deleted, inserted or reordered
        event named, every write event no block settles, and every event that belongs to no
        chain. A chain none of whose events holds under any key version they name (the ring
        lacks it, or its key there did not sign them) is not read as tampered event by event:
        what it could not check is one `KeyProblem` per version, after the findings."""
        if self._ring is None:
            raise ValueError("verifying the audit trail needs the key-encryption key ring")
        ring = KeyCheck(self._ring)
        account = _Account()
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
                    pins = pins_of(ring, await self._repo.blocks(info.chain))
                elif pins is None:
                    pins = pins_of(ring, blocks)
                account.chain(ring, info.chain, events,
                              verify_writes(ring, info.chain, events, pins.get(info.chain, {})))
                continue
            checkpoint = info.checkpoint
            if checkpoint is not None:
                account.checkpoint(ring, info)
            found = []
            if any(e.get("kind") == WRITE for e in events):  # its `writes` mark taken off
                found.append(Finding("edited", info.chain, None, WRITES_MARK))
            blocks.extend(e for e in events if is_block(e))
            found.extend(verify_chain(ring, info.chain, events, checkpoint=checkpoint,
                                      head=info.head, placed=info.placed))
            account.chain(ring, info.chain, events, found)
        findings, problems = account.result(ring)
        if chains is None:
            # Write events settled in a chain that is gone (its node deleted).
            known = {info.chain for info in infos if info.writes}
            findings.extend(Finding("deleted", chain, seq, None)
                            for chain, settled in sorted(pins_of(ring, blocks).items())
                            if chain not in known for seq in sorted(settled))
            findings.extend(Finding("unlinked", None, None, event_id)
                            for event_id in await self._repo.unchained())
        return [*findings, *problems]

    def checkpoint_sig(self, chain: str, seq: int, mac: str) -> str:
        """The signature of a checkpoint as versions before checkpoints named their key signed
        it (under the active version, naming none)."""
        return checkpoint_sig(self._ring, chain, seq, mac)

    def export(self, since: datetime, until: datetime) -> AsyncIterator[dict[str, Any]]:
        return self._repo.export(since=since, until=until)


def present(event: dict[str, Any]) -> dict[str, Any]:
    out = {k: event.get(k) for k in SHOWN}
    at = out["at"]
    if isinstance(at, datetime):
        out["at"] = at.astimezone(UTC).isoformat()
    return out


def checkpoint_sig(ring: Ring, chain: str, seq: int, mac: str, version: str | None = None
                   ) -> str:
    """The signature of a chain's checkpoint (its last pruned event's number and MAC) under the
    audit key of `version` (the active one by default)."""
    return ring.audit_mac(f"checkpoint|{chain}|{seq}|{mac}".encode(), version)


def signed_checkpoint(ring: KeyRing, chain: str, seq: int, mac: str) -> dict[str, Any]:
    """A chain's checkpoint as a prune stores it: signed under the active key version, which it
    names (`key_version`), so it verifies under that version after the ring's active one
    moved on."""
    version = ring.active
    return {"chain": chain, "seq": seq, "mac": mac, "key_version": version,
            "sig": checkpoint_sig(ring, chain, seq, mac, version)}


def checkpoint_holds(ring: KeyCheck, info: ChainInfo) -> tuple[bool, str | None]:
    """Whether the chain's checkpoint signature holds, and the key version it holds under: the
    one it names, or, stored before checkpoints named their key (signed under the version
    active then), any version in the ring under which it holds (None when none does)."""
    chain, (seq, mac), sig = info.chain, info.checkpoint, info.checkpoint_sig
    named = info.checkpoint_key_version
    for version in ring.versions if named is None else (named,):
        try:
            if sig == checkpoint_sig(ring, chain, seq, mac, version):
                return True, version
        except (CryptoError, TypeError):
            continue
    return False, named if isinstance(named, str) else None


class _Account:
    """A verification's findings, each with the key version of what it names, and what each
    version signed: to tell a key the ring lacks, or that did not sign, from tampering."""

    def __init__(self) -> None:
        # Each finding, the version of what it names, and what it names: "event", "checkpoint"
        # or "unnamed" (a checkpoint stored before checkpoints named their key version).
        self.named: list[tuple[Finding, str | None, str]] = []
        self.checkpoints: Counter[str] = Counter()
        self.chains: dict[str, Counter[str]] = {}  # each chain's events by version

    def chain(self, ring: KeyCheck, chain: str, events: list[dict[str, Any]],
              findings: list[Finding]) -> None:
        version_at = {(e.get("seq"), e.get("id")): ring.version_of(e) for e in events}
        self.chains[chain] = Counter(v for v in version_at.values() if v is not None)
        self.named.extend((f, version_at.get((f.seq, f.event_id))
                           if f.kind in SIGNED_KINDS else None, "event") for f in findings)

    def checkpoint(self, ring: KeyCheck, info: ChainInfo) -> None:
        held, version = checkpoint_holds(ring, info)
        if version is not None:
            self.checkpoints[version] += 1
            if held:
                ring.held[version] += 1
        if not held:
            self.named.append((Finding("edited", info.chain, info.checkpoint[0], "checkpoint"),
                               version, "unnamed" if info.checkpoint_key_version is None
                               else "checkpoint"))

    def result(self, ring: KeyCheck) -> tuple[list[Finding], list[KeyProblem]]:
        """The findings, and what keys kept from being checked. Unchecked are a chain's events
        when every one is signed under a version nothing held under (the ring lacks it, or its
        key of that version did not sign): a chain's events share the version of the process
        that wrote them, so one naming another version in a chain that holds is an edit, named.
        Unchecked too, when its own chain's events are unchecked or none are left: a checkpoint
        under such a version, and one naming no version (stored before checkpoints named it)
        that holds under none when any version is such. A failing checkpoint of a chain whose
        events hold is an edit, named, whatever version it names: a checkpoint moved forward
        must not pass for a key problem by naming a version no key holds under."""
        versions = {v for counts in self.chains.values() for v in counts} | {*self.checkpoints}
        unchecked = {v for v in versions if not ring.held[v]}
        lost = {chain for chain, counts in self.chains.items()
                if counts and counts.keys() <= unchecked}

        def unverifiable(chain: str) -> bool:
            return chain in lost or not self.chains.get(chain)

        findings, checkpoints, unnamed = [], Counter(), 0
        for finding, version, what in self.named:
            if what == "event" and version in unchecked and finding.chain in lost:
                continue
            if what == "checkpoint" and version in unchecked and unverifiable(finding.chain):
                checkpoints[version] += 1
            elif what == "unnamed" and unchecked and unverifiable(finding.chain):
                unnamed += 1
            else:
                findings.append(finding)
        events = sum((self.chains[chain] for chain in lost), Counter())
        problems = [KeyProblem(v, v in ring.missing, events[v], checkpoints[v])
                    for v in sorted({*events, *checkpoints})]
        if unnamed:
            problems.append(KeyProblem(None, False, 0, unnamed))
        return findings, problems
