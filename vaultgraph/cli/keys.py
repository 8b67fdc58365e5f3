"""`vaultgraph keys`: the key-encryption keys (rotate: add a version, or move to another provider
or token key, and re-wrap every tenant; status: the provider, the active KEK, each tenant's)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from ..failures import Failure
from ..neo4j_local import fsync_dir
from ..settings import Settings
from .common import Progress, check_kek, emit, run_async, services, write_secret


def add_parser(sub) -> None:
    p_keys = sub.add_parser("keys", help="key-encryption keys")
    keys = p_keys.add_subparsers(dest="action", required=True)
    p = keys.add_parser("rotate", help="re-wrap tenant keys online within the configured "
                        "provider: file adds a key version and re-wraps the tenants under the "
                        "key file (resuming an unfinished rotation instead of adding another; "
                        "tenants under a token key stay there), pkcs11 re-wraps every tenant "
                        "under VAULTGRAPH_PKCS11_KEY_LABEL. Only --to moves tenants to another "
                        "provider or token key")
    p.add_argument("--tenant", action="append", metavar="ID",
                   help="only this tenant (repeat for more); default: every tenant")
    p.add_argument("--to", metavar="TARGET",
                   help="'pkcs11:<key label>' (generated in the token if absent) or 'file' "
                        "(the key file's newest version): re-wrap under that key, no file "
                        "version added")
    p = keys.add_parser("status", help="the provider, the active key-encryption key and each "
                        "tenant's")
    p.add_argument("--json", action="store_true", help="one JSON document")


def add_kek_version(settings: Settings) -> str:
    """Append a new key version to the key file (atomically, 0600, durable before any tenant is
    re-wrapped under it); the new one is active. The versions are read here, under the
    caller's rotation lock and a lock on the key file itself (rotations of two databases may
    share a file): two rotations never both add the same version. A key file that cannot be
    written (a read-only secret mount) is one line saying what to do."""
    from ..crypto import KeyRing
    from ..keys.custody import file_keks

    if settings.kek:
        raise Failure("the key ring comes from VAULTGRAPH_KEK, which this command cannot change",
                      "append a new '<version>:<base64url key>' entry to VAULTGRAPH_KEK on every "
                      "replica, restart them, then run vaultgraph keys rotate again")
    path = settings.kek_path
    tmp = path.with_name(path.name + ".new")
    try:
        # Read and rewritten under a lock beside it: rotations of two databases that share one
        # key file (the rotation lock is each database's) must not both add a version as the
        # next one and lose one of them. Only where the key file can be written at all.
        with _key_file_lock(path):
            versions = list(file_keks(settings))
            numbers = [int(v[1:]) for v in versions if v[:1] == "k" and v[1:].isdigit()]
            new_version = f"k{max(numbers, default=0) + 1}"
            while new_version in versions:
                new_version += "n"
            entry = KeyRing.generate_spec().replace("k1:", f"{new_version}:", 1)
            spec = path.read_text().strip()
            _write_version(path, tmp, f"{spec},{entry}")
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise Failure(f"cannot add a key-encryption key version to {path} "
                      f"({exc.strerror or type(exc).__name__}; no key was added)",
                      "where the key file is read-only (a mounted secret), append a new "
                      "'<version>:<base64url key>' entry to the file it is mounted from, restart "
                      "the replicas, then run vaultgraph keys rotate again: it re-wraps under "
                      "the new version and writes nothing") from None
    return new_version


@contextlib.contextmanager
def _key_file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on a file beside the key file, for reading and rewriting it."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock
        yield
        return
    fd = os.open(path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _write_version(path: Path, tmp: Path, spec: str) -> None:
    """The key file's new text, through `tmp`: atomic, 0600, on disk before it is used."""
    tmp.unlink(missing_ok=True)
    write_secret(tmp, spec)
    with open(tmp) as f:  # the new key on disk before it wraps anything: a crash loses none
        os.fsync(f.fileno())
    tmp.replace(path)
    fsync_dir(path.parent)


def command(settings: Settings, args: argparse.Namespace) -> int:
    """A rotation without --to stays within the configured provider: with `file` it rotates
    the tenants under the key file (adding a version, or resuming) and leaves those under a
    token key where they are; with `pkcs11` it re-wraps every tenant under the configured token
    key. Only --to moves tenants to another provider or token key."""
    from ..keys.pkcs11 import PREFIX

    if args.action == "status":
        return status(settings, as_json=args.json)
    only = set(args.tenant) if args.tenant else None
    to = args.to
    if to is None and settings.kek_provider != "file":
        to = PREFIX + settings.pkcs11_key_label
    # The configured token key is created here only by a rotation into it (no --to): a --to
    # names the key it creates itself, and the configured one must then exist.
    check_kek(settings, generate=args.to is None)
    progress = Progress("re-wrapped tenants")

    async def work():
        from ..repository.key_rotation import rotation_lock

        async with (services(settings, wraps_keys=True) as svc,
                    rotation_lock(svc.database, _say_waiting)):
            await _check_ids(svc.tenants, only, to is None)
            rewrapping, unlinked = _rewrap_events(svc.audit_writer)
            try:
                if to is None:
                    result = await _rotate_file(settings, svc, only, progress, rewrapping)
                else:
                    result = await _rotate_to(settings, svc, to, only, progress, rewrapping)
            except BaseException:
                # Stopped (Neo4j lost, Ctrl-C) after events that could not be linked: the
                # command's own failure line follows, and this one says they are there.
                if unlinked:
                    print(f"vaultgraph: {_unlinked_line(len(unlinked))}", file=sys.stderr)
                raise
            return result, len(unlinked)

    if to is None:
        fix = ("their keys are wrapped under a key not in the ring; add it back to "
               f"{settings.kek_source} and rerun vaultgraph keys rotate")
    else:
        fix = ("their keys are wrapped under a key-encryption key this process cannot reach; "
               "configure it (key file or token) and rerun vaultgraph keys rotate")
    result, unlinked = run_async(work)
    reported = _report(result, progress, fix)
    if unlinked:
        raise Failure(_unlinked_line(unlinked), _UNLINKED_FIX)
    return reported


_UNLINKED_FIX = ("the re-wraps stand (they change no access): do not run the command again "
                 "for them; check that Neo4j is reachable")


def _unlinked_line(unlinked: int) -> str:
    return (f"{unlinked} tenant(s) were re-wrapped and their audit events stored with the "
            "re-wraps, but the events could not be linked into their chains (vaultgraph audit "
            "verify names them unlinked)")


def _say_waiting(holders: list[str]) -> None:
    print(f"waiting for another vaultgraph keys rotate ({', '.join(holders)}) to finish: one "
          "rotation at a time runs against this database", file=sys.stderr, flush=True)


def status(settings: Settings, *, as_json: bool) -> int:
    """The provider, the active KEK (with the token key's attributes) and each tenant's KEKs."""
    from ..keys.custody import describe

    async def work():
        async with services(settings) as svc:
            body = await asyncio.to_thread(describe, svc.custody)
            body["tenants"] = [t async for t in svc.tenants.kek_census()]
            body["pending"] = sum(1 for t in body["tenants"] if not t["current"])
            return body

    body = run_async(work)
    if as_json:
        emit(body)
        return 0
    print(f"provider     {body['provider']}\nactive KEK   {body['active_kek']}")
    if "active_key" in body:
        key = body["active_key"]
        print(f"token key    {key['label']} in {body['token']}: AES-{key['bits']}, "
              + ("sensitive, " if key["sensitive"] else "NOT sensitive, ")
              + ("never extractable" if key["never_extractable"] else "extractable"))
    print(f"tenants      {len(body['tenants'])}, {body['pending']} not under the active KEK")
    for tenant in body["tenants"]:
        print(f"  {tenant['id']}  {','.join(tenant['kek_versions'])}  {tenant['name']}")
    return 0


async def _check_ids(tenants, only: set[str] | None, adds_key: bool) -> None:
    """Every id of --tenant names a tenant: a typo stops the rotation before anything changes."""
    from ..errors import NotFound

    unknown = []
    for tenant_id in sorted(only or ()):
        try:
            await tenants.get(tenant_id)
        except NotFound:
            unknown.append(tenant_id)
    if unknown:
        raise Failure(f"no tenant with the id {', '.join(unknown)}",
                      "check the ids (vaultgraph tenants list)"
                      + ("; no key was added" if adds_key else ""))


async def _rotate_to(settings: Settings, svc, to: str, only: set[str] | None,
                     progress: Progress, rewrapping):
    """Re-wrap every tenant's keys (of `only`) under `to` ("file" or "pkcs11:<label>"),
    online and resumable: tenants already under it are skipped."""
    target = await asyncio.to_thread(svc.custody.target, to)
    for label in svc.custody.generated:
        print(f"generated the key-encryption key {label!r} inside the PKCS#11 token "
              f"{settings.pkcs11_token_label!r} (sensitive, never extractable)", file=sys.stderr)
    tenants = svc.tenants.with_ring(target)
    waiting = await tenants.pending_rewrap(only)
    print(f"re-wrapping {waiting} tenant(s) under {target.active}", file=sys.stderr)
    return await tenants.rewrap_all(progress, only=only, rewrapping=rewrapping)


async def _rotate_file(settings: Settings, svc, only: set[str] | None, progress: Progress,
                       rewrapping):
    """The key file's rotation: the tenants under its versions (of `only`) are re-wrapped
    under its newest, after adding one when none of them is behind (and none when every one is
    in the token). Tenants under a token key stay there (only --to file moves them out of the
    token)."""
    from ..keys.pkcs11 import PREFIX

    in_file: set[str] = set()
    in_token = 0
    async for tenant in svc.tenants.kek_census():
        if only is not None and tenant["id"] not in only:
            continue
        if any(kek.startswith(PREFIX) for kek in tenant["kek_versions"]):
            in_token += 1
        else:
            in_file.add(tenant["id"])
    if in_token:
        print(f"leaving {in_token} tenant(s) under a PKCS#11 token key where they are (a "
              "rotation of the key file moves none out of the token; --to file does)",
              file=sys.stderr)
    ring = await asyncio.to_thread(svc.custody.reload)  # the key file as it is, under the lock
    waiting = await svc.tenants.with_ring(ring).pending_rewrap(in_file)
    if waiting:
        print(f"resuming: {waiting} tenant(s) still wrapped under an older key; re-wrapping "
              f"under {ring.active}", file=sys.stderr)
    elif in_token and not in_file:
        # A version would wrap nothing: it would only be one more key to keep and back up.
        print("no tenant of the rotation is under the key file: no key-encryption key version "
              "was added", file=sys.stderr)
    else:
        added = await asyncio.to_thread(add_kek_version, settings)
        print(f"added key-encryption key version {added} to {settings.kek_path}",
              file=sys.stderr)
        ring = await asyncio.to_thread(svc.custody.reload)
    return await svc.tenants.with_ring(ring).rewrap_all(progress, only=in_file,
                                                        rewrapping=rewrapping)


def _rewrap_events(writer):
    """Each re-wrapped tenant's `kek:rotate` event (docs/audit.md, "The command line"), for
    `TenantService.rewrap_all`'s `rewrapping`: the tenant's re-wrap is a change under its own
    event (`CommandTrail.change`), so the re-wrap's write stores the event in its transaction,
    and the event is linked into its chain before the next tenant is re-wrapped. A write that
    matched nothing (the tenant's keys changed meanwhile) committed its event too, linked as a
    conflict (409). No application or key: the event names the tenant only. Also the ids of the
    tenants re-wrapped whose events could not be linked (stored, pending)."""
    from ..audit.command import KEK_ROTATE, Affected, CommandTrail, EventNotLinked

    trail = CommandTrail(writer, "keys rotate")
    unlinked: list[str] = []

    async def rewrapping(tenant_id: str, before: list[str], after: list[str], write) -> None:
        async def rewrap():
            await write()
            return None, Affected(tenant_id)

        change = asyncio.ensure_future(trail.change(KEK_ROTATE, Affected(tenant_id), rewrap,
                                                    status=200))
        try:
            await asyncio.shield(change)
        except asyncio.CancelledError:
            # Interrupted (Ctrl-C) while the tenant's write or its event's link runs: both
            # finish first, so a stopped run leaves the event of each tenant it re-wrapped.
            with contextlib.suppress(Exception):
                await change
            raise
        except EventNotLinked:
            unlinked.append(tenant_id)

    return rewrapping, unlinked


def _report(result, progress: Progress, fix: str) -> int:
    """A rotation's outcome: the progress line, the JSON summary, a failure naming tenants."""
    progress.done(f"{result.rewrapped} done, {result.current} already current, "
                  f"{len(result.failed)} failed")
    emit(result.to_dict())
    if result.failed:
        raise Failure(f"{len(result.failed)} tenant(s) could not be re-wrapped "
                      f"({', '.join(result.failed[:3])})", fix)
    return 0
