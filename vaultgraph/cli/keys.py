"""`vaultgraph keys`: the key-encryption keys (rotate: add a version, re-wrap every tenant)."""

from __future__ import annotations

import argparse
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
                        "rotation instead of adding another key")
    p.add_argument("--tenant", action="append", metavar="ID",
                   help="only this tenant (repeat for more); default: every tenant")


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
    check_kek(settings)
    with rotation_lock(settings):
        return _rotate(settings, args)


def _rotate(settings: Settings, args: argparse.Namespace) -> int:
    ring = check_kek(settings)  # again, under the lock: another rotation may have added one
    only = set(args.tenant) if args.tenant else None

    async def pending():
        from ..errors import NotFound

        async with services(settings) as svc:
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

    result = run_async(work)
    progress.done(f"{result.rewrapped} done, {result.current} already current, "
                  f"{len(result.failed)} failed")
    emit(result.to_dict())
    if result.failed:
        raise Failure(f"{len(result.failed)} tenant(s) could not be re-wrapped "
                      f"({', '.join(result.failed[:3])})",
                      "their keys are wrapped under a key not in the ring; add it back to "
                      f"{settings.kek_source} and rerun vaultgraph keys rotate")
    return 0
