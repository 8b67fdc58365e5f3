"""What the commands share: output (JSON lines, keys delivered once), progress on stderr, the
settings' resources (the local Neo4j, the key ring, the services over one driver)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import sys
from pathlib import Path

import orjson

from ..failures import Failure
from ..settings import Settings

PAGE = 100

# -- output -------------------------------------------------------------------------------------

def emit(value) -> None:
    """One JSON line on stdout, flushed. A closed stdout (`| head`) raises BrokenPipeError, which
    stops the command: `main` ends it quietly, with the status of a writer SIGPIPE ended."""
    sys.stdout.write(orjson.dumps(value, default=str).decode() + "\n")
    sys.stdout.flush()


def write_secret(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")


class KeyOutput:
    """Where a new key goes: stdout with the ids, or only a new 0600 file (`--key-file`).

    The file is created (O_EXCL) before anything is committed, so a name that exists or a
    directory that cannot be written is refused while nothing has changed yet; `deliver` puts
    the key in it before anything else is done with the key (rotate-key revokes the old keys
    only after)."""

    def __init__(self, path: Path | None = None, fd: int | None = None):
        self.path = path
        self._fd = fd

    @classmethod
    @contextlib.contextmanager
    def open(cls, key_file: str | None):
        if not key_file:
            yield cls()
            return
        path = Path(key_file).expanduser().absolute()
        fix = "name a new file in a writable directory for --key-file"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Failure(f"cannot create the directory {path.parent} ({exc.strerror})",
                          fix) from None
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise Failure(f"{path} exists", "name a new file for --key-file (it is never "
                          "overwritten)") from None
        except OSError as exc:
            raise Failure(f"cannot create {path} ({exc.strerror})", fix) from None
        out = cls(path, fd)
        try:
            yield out
        finally:
            if out._fd is not None:  # nothing was delivered: the command failed before
                os.close(out._fd)
                path.unlink(missing_ok=True)

    def deliver(self, created: dict) -> dict:
        """The answer to print: `created` as is, or with its key written to the file and
        replaced by the file's name."""
        if self.path is None:
            return created
        with os.fdopen(self._fd, "w") as f:
            self._fd = None
            f.write(created["key"] + "\n")
            f.flush()
            os.fsync(f.fileno())
        return {**{k: v for k, v in created.items() if k != "key"}, "key_file": str(self.path)}


class Progress:
    """`label done/total` on stderr: redrawn in place on a terminal, every 10% otherwise."""

    def __init__(self, label: str):
        self.label = label
        self.tty = sys.stderr.isatty()
        self.last_decile = -1

    def __call__(self, done: int, total: int | None = None) -> None:
        text = f"{self.label} {done}" + (f"/{total}" if total else "")
        if self.tty:
            print(f"\r{text}", end="", file=sys.stderr, flush=True)
            return
        decile = (done * 10 // total) if total else done // 1000
        if decile != self.last_decile:
            self.last_decile = decile
            print(text, file=sys.stderr, flush=True)

    def done(self, text: str) -> None:
        print(("\r" if self.tty else "") + f"{self.label} {text}", file=sys.stderr, flush=True)

# -- audit events -------------------------------------------------------------------------------

async def audited(trail, operation: str, affected, work, *, status: int,
                  reason: str | None = None, deliver=lambda result: result):
    """`trail.change` (audit/command.py `CommandTrail`): the change with its event. When the
    change was made and its event could not be linked, what the change made is still printed
    (`deliver`: a new key to its file), and the command fails with one line saying so."""
    from ..audit.command import EventNotLinked

    try:
        return await trail.change(operation, affected, work, status=status, reason=reason)
    except EventNotLinked as exc:
        emit(deliver(exc.result))
        raise Failure(*exc.explained()) from None

# -- settings and resources ---------------------------------------------------------------------

def local_neo4j(settings: Settings):
    from ..neo4j_local import LocalNeo4j

    return LocalNeo4j(
        home=settings.local_neo4j_home(),
        lib_dir=settings.home_path / "neo4j-lib",
        bolt_port=settings.neo4j_bolt_port,
        http_port=settings.neo4j_http_port,
        password=settings.neo4j_password or None,
        heap=settings.neo4j_heap,
        pagecache=settings.neo4j_pagecache,
    )


def ensure_dev_kek(settings: Settings) -> None:
    """Development only: generate a key-encryption key once, if none is configured."""
    from ..crypto import KeyRing

    if settings.kek or settings.kek_path.exists():
        return
    write_secret(settings.kek_path, KeyRing.generate_spec())
    print(f"generated a development key-encryption key into {settings.kek_path} (mode 0600); "
          "production sets VAULTGRAPH_KEK or VAULTGRAPH_KEK_FILE", file=sys.stderr)


_WARNED: set[Path] = set()  # the key files this process warned of


def warn_open_key_files(settings: Settings) -> None:
    """One line for each key file the key ring is read from (`VAULTGRAPH_KEK_FILE`,
    `VAULTGRAPH_PKCS11_PIN_FILE`) whose mode lets group or others at it: its name, its mode
    and the fix, never its content; once a file in a process. A warning, not a refusal: a
    secret mounted read-only may carry a mode the operator does not set where it is read (a
    Kubernetes secret is 0644 unless its defaultMode says otherwise, a swarm secret 0444).
    Serving, it is a log line; other commands silence logs and print it."""
    from ..keys.custody import exposed_key_files

    for setting, path, mode in exposed_key_files(settings):
        if path in _WARNED:
            continue
        _WARNED.add(path)
        line = f"{setting} {path} is open to group or others (mode {mode:04o}): chmod 600 {path}"
        if logging.root.manager.disable >= logging.ERROR:
            print(f"vaultgraph: warning: {line}", file=sys.stderr)
        else:
            logging.getLogger("vaultgraph.keys").warning(line)


def check_kek(settings: Settings, *, generate: bool = True):
    """The key ring, opened now so a malformed key, an unreachable token or a refused PIN is
    named (one line) before anything starts; with the pkcs11 provider the key is generated in
    the token here when absent and `generate` (serve, keys rotate), named as missing otherwise.
    A key file open to group or others is warned of first (`warn_open_key_files`)."""
    from ..keys.custody import open_custody

    warn_open_key_files(settings)
    custody = open_custody(settings, generate=generate)
    custody.close()
    # Serving, the provider's log line says it; other commands silence logs: say it here.
    for label in custody.generated if logging.root.manager.disable >= logging.ERROR else ():
        print(f"generated the key-encryption key {label!r} inside the PKCS#11 token "
              f"{settings.pkcs11_token_label!r} (sensitive, never extractable)", file=sys.stderr)
    return custody.ring


def local_settings(settings: Settings, neo) -> Settings:
    """Point the service at the local server's password file when none is configured."""
    if settings.neo4j_password:
        return settings
    return dataclasses.replace(settings, neo4j_password=neo.resolve_password())


def services(settings: Settings, *, with_keys: bool = True, wraps_keys: bool = False):
    """The services over one driver. `wraps_keys`: the command writes wrapped tenant keys, so
    the key ring is checked against the stored tenant keys first, as `serve` checks it before
    serving (`TenantService.verify_key_ring`): a wrong ring refuses with one line and nothing
    is written."""
    from ..wiring import open_services

    if with_keys:
        check_kek(settings, generate=False)  # commands that create a key call it first
    settings.resolved_neo4j_password()  # a missing password is named before connecting
    opened = open_services(settings, with_keys=with_keys, schema_required=True)
    return _key_checked(opened) if wraps_keys else opened


@contextlib.asynccontextmanager
async def _key_checked(opened):
    async with opened as svc:
        await svc.tenants.verify_key_ring()
        yield svc


def run_async(work):
    return asyncio.run(work())
