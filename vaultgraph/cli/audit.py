"""`vaultgraph audit`: verify the chains, export events as JSON lines, prune past the retention."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import orjson

from ..audit.chain import Finding, KeyProblem
from ..failures import Failure
from ..settings import Settings
from .common import Progress, emit, run_async, services


def add_parser(sub) -> None:
    p_audit = sub.add_parser("audit", help="the audit trail")
    audit = p_audit.add_subparsers(dest="action", required=True)
    p = audit.add_parser("verify", help="check every chain; findings as JSON lines, exit 1 if "
                         "any, 3 if the key ring lacks or mismatches a key that signed")
    p.add_argument("--chain", action="append", metavar="ID",
                   help="only this chain (repeat for more); default: every chain")
    p = audit.add_parser("export", help="events as JSON lines, oldest first")
    p.add_argument("--since", help="ISO 8601 date or time (inclusive); default: the beginning")
    p.add_argument("--until", help="ISO 8601 date or time (exclusive); default: now")
    p.add_argument("--out", metavar="FILE", help="write to FILE (mode 0600) instead of stdout")
    audit.add_parser("prune", help="one prune pass now: delete events older than "
                     "VAULTGRAPH_AUDIT_RETENTION_DAYS, leaving signed checkpoints")


# The exit status of `audit verify` when a key that signed is missing from the ring or is not
# the ring's key of its version (1 is a finding: tampering).
UNCHECKED = 3


class _Count:
    """A running count, shown on stderr (`Progress`) as each step adds to it."""

    def __init__(self, label: str) -> None:
        self.progress = Progress(label)
        self.count = 0

    def __call__(self, n: int) -> None:
        self.count += n
        self.progress(self.count)

    def done(self, text: str) -> None:
        self.progress.done(text)


def _moment(value: str, name: str) -> datetime:
    """The option's time in UTC (no offset: UTC); one UTC cannot hold is refused too."""
    from ..tokens.fields import INSTANT_YEARS, utc_instant  # here: it loads dateutil

    try:
        return utc_instant(datetime.fromisoformat(value))
    except ValueError:
        raise Failure(f"{name} is not an ISO 8601 date or time {INSTANT_YEARS}",
                      "use e.g. 2026-01-31 or 2026-01-31T12:00:00Z", status=2) from None


def command(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "verify":
        step = _Count("verified events")

        async def verify():
            from ..errors import NotFound

            async with services(settings) as svc:
                try:
                    return await svc.audit_log.verify(
                        step, chains=set(args.chain) if args.chain else None)
                except NotFound as exc:
                    raise Failure(exc.detail.rstrip("."), "the chain ids are the \"chain\" "
                                  "of the events vaultgraph audit export writes") from None

        found = run_async(verify)
        findings = [f for f in found if isinstance(f, Finding)]
        unchecked = [f for f in found if isinstance(f, KeyProblem)]
        step.done(f"{step.count} checked, {len(findings)} finding(s)"
                  + (f", {len(unchecked)} key problem(s)" if unchecked else ""))
        for finding in findings:
            emit({"kind": finding.kind, "chain": finding.chain, "seq": finding.seq,
                  "event_id": finding.event_id})
        keys = "; ".join(problem.describe() for problem in unchecked)
        if findings:
            raise Failure(f"the audit trail fails verification ({len(findings)} finding(s), "
                          "listed on stdout" + (f"; not checked: {keys}" if keys else "") + ")",
                          "investigate the named events; the trail was changed outside the "
                          "service")
        if unchecked:
            raise Failure(f"the audit trail could not be checked with this key ring: {keys}",
                          "verify with the key ring that signed it (every version named, "
                          "VAULTGRAPH_KEK_FILE, VAULTGRAPH_KEK or the PKCS#11 token's keys); "
                          "until then nothing it signed is verified",
                          status=UNCHECKED)
        return 0

    if args.action == "prune":
        return _prune(settings)

    since = _moment(args.since, "--since") if args.since else datetime(1970, 1, 1, tzinfo=UTC)
    until = _moment(args.until, "--until") if args.until else datetime.now(UTC)
    progress = Progress("exported events")

    async def export(out):
        n = 0
        async with services(settings) as svc:
            async for event in svc.audit_log.export(since, until):
                out.write(orjson.dumps(event, default=str) + b"\n")
                n += 1
                if n % 1000 == 0:
                    progress(n)
        return n

    if args.out:
        # A new file beside the named one, renamed over it at the end: an export that cannot
        # start or stops half-way leaves the previous file as it was; mode 0600 either way.
        path = Path(args.out).expanduser().absolute()
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        except OSError as exc:
            raise Failure(f"cannot write in {path.parent} ({exc.strerror})",
                          "name a file in a writable directory for --out") from None
        try:
            with os.fdopen(fd, "wb") as out:
                n = run_async(lambda: export(out))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    else:
        # A reader that stops reading (`| head`) raises BrokenPipeError here: `main` ends the
        # command quietly.
        n = run_async(lambda: export(sys.stdout.buffer))
        sys.stdout.flush()
    progress.done(f"{n} written" + (f" to {args.out}" if args.out else ""))
    return 0


def _prune(settings: Settings) -> int:
    """One prune pass (`AuditPruner.prune_before` the retention's cutoff), the events deleted
    counted on stderr as each transaction commits; the count and the cutoff on stdout."""
    step = _Count("pruned events")

    async def prune():
        async with services(settings) as svc:
            cutoff = svc.audit_pruner.cutoff()
            return cutoff, await svc.audit_pruner.prune_before(cutoff, progress=step)

    cutoff, pruned = run_async(prune)
    step.done(f"{pruned} deleted, older than {cutoff.isoformat()}")
    emit({"pruned": pruned, "before": cutoff.isoformat()})
    return 0
