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
from ..settings import Settings
from .common import Progress, check_kek, emit, run_async, services, write_secret


def add_parser(sub) -> None:
    p_keys = sub.add_parser("keys", help="key-encryption keys")
    keys = p_keys.add_subparsers(dest="action", required=True)
    p = keys.add_parser("rotate", help="add a new key-encryption key to the key file and "
                        "re-wrap every tenant's keys under it, online; resumes an unfinished "
                        "rotation instead of adding another key. --to moves them to another "
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
    re-wrapped under it); the new one is active. The caller holds `rotation_lock`, and the
    ring is read here, under it: two rotations never both add the same version."""
    from ..crypto import KeyRing

    if settings.kek:
        raise Failure("the key ring comes from VAULTGRAPH_KEK, which this command cannot change",
                      "append a new '<version>:<base64url key>' entry to VAULTGRAPH_KEK on every "
                      "replica, restart them, then run vaultgraph keys rotate again")
    ring = check_kek(settings)
    numbers = [int(v[1:]) for v in ring.versions if v[:1] == "k" and v[1:].isdigit()]
    new_version = f"k{max(numbers, default=0) + 1}"
    while new_version in ring.versions:
        new_version += "n"
    entry = KeyRing.generate_spec().replace("k1:", f"{new_version}:", 1)
    path = settings.kek_path
    spec = path.read_text().strip()
    tmp = path.with_name(path.name + ".new")
    tmp.unlink(missing_ok=True)
    write_secret(tmp, f"{spec},{entry}")
    with open(tmp) as f:  # the new key on disk before it wraps anything: a crash loses no key
        os.fsync(f.fileno())
    tmp.replace(path)
    _fsync_dir(path.parent)
    return new_version


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def rotation_lock(settings: Settings) -> Iterator[None]:
    """One `keys rotate` at a time per key file: an exclusive lock on a file beside it, held
    for the whole rotation (a second waits, then resumes or adds the next version)."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; one operator, one rotation at a time
        fcntl = None
    if settings.kek or fcntl is None:
        yield
        return
    lock_path = settings.kek_path.with_name(settings.kek_path.name + ".lock")
    fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another vaultgraph keys rotate ({lock_path})", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def command(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "status":
        return status(settings, as_json=args.json)
    check_kek(settings)
    if args.to or settings.kek_provider != "file":
        # Between providers, or to the token's configured key: no file version is added.
        return _rotate_to(settings, args.to or f"pkcs11:{settings.pkcs11_key_label}",
                          set(args.tenant) if args.tenant else None)
    with rotation_lock(settings):
        return _rotate(settings, args)


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


def _rotate_to(settings: Settings, to: str, only: set[str] | None) -> int:
    """Re-wrap every tenant's keys (of `only`) under `to` ("file" or "pkcs11:<label>"),
    online and resumable: tenants already under it are skipped."""
    from ..errors import NotFound

    progress = Progress("re-wrapped tenants")

    async def work():
        async with services(settings, wraps_keys=True) as svc:
            target = await asyncio.to_thread(svc.custody.target, to)
            for label in svc.custody.generated:
                print(f"generated the key-encryption key {label!r} inside the PKCS#11 token "
                      f"{settings.pkcs11_token_label!r} (sensitive, never extractable)",
                      file=sys.stderr)
            tenants = svc.tenants.with_ring(target)
            unknown = []
            for tenant_id in sorted(only or ()):
                try:
                    await tenants.get(tenant_id)
                except NotFound:
                    unknown.append(tenant_id)
            if unknown:
                raise Failure(f"no tenant with the id {', '.join(unknown)}",
                              "check the ids (vaultgraph tenants list)")
            waiting = await tenants.pending_rewrap(only)
            print(f"re-wrapping {waiting} tenant(s) under {target.active}", file=sys.stderr)
            return await tenants.rewrap_all(progress, only=only)

    return _report(run_async(work), progress,
                   "their keys are wrapped under a key-encryption key this process cannot "
                   "reach; configure it (key file or token) and rerun vaultgraph keys rotate")


def _rotate(settings: Settings, args: argparse.Namespace) -> int:
    ring = check_kek(settings)  # again, under the lock: another rotation may have added one
    only = set(args.tenant) if args.tenant else None

    async def pending():
        from ..errors import NotFound

        async with services(settings, wraps_keys=True) as svc:
            unknown = []
            for tenant_id in sorted(only or ()):
                try:
                    await svc.tenants.get(tenant_id)
                except NotFound:
                    unknown.append(tenant_id)
            if unknown:  # before any key is added: nothing to re-wrap for a typo
                raise Failure(f"no tenant with the id {', '.join(unknown)}",
                              "check the ids (vaultgraph tenants list); no key was added")
            return await svc.tenants.pending_rewrap(only)

    waiting = run_async(pending)
    if waiting:
        print(f"resuming: {waiting} tenant(s) still wrapped under an older key; re-wrapping "
              f"under {ring.active}", file=sys.stderr)
    else:
        added = add_kek_version(settings)
        print(f"added key-encryption key version {added} to {settings.kek_path}",
              file=sys.stderr)

    progress = Progress("re-wrapped tenants")

    async def work():
        async with services(settings) as svc:
            return await svc.tenants.rewrap_all(progress, only=only)

    return _report(run_async(work), progress,
                   "their keys are wrapped under a key not in the ring; add it back to "
                   f"{settings.kek_source} and rerun vaultgraph keys rotate")


def _report(result, progress: Progress, fix: str) -> int:
    """A rotation's outcome: the progress line, the JSON summary, a failure naming tenants."""
    progress.done(f"{result.rewrapped} done, {result.current} already current, "
                  f"{len(result.failed)} failed")
    emit(result.to_dict())
    if result.failed:
        raise Failure(f"{len(result.failed)} tenant(s) could not be re-wrapped "
                      f"({', '.join(result.failed[:3])})", fix)
    return 0
