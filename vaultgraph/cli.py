"""The `vaultgraph` command: serve, run a local Neo4j, manage tenants, applications, keys and the
audit trail (README "Command line").

Every runtime failure is one line on stderr, `vaultgraph: <cause>: <what to do>`, with exit status
1 (2 for usage errors); `--debug` shows the traceback instead. Commands that create or list print
JSON on stdout (lists: one JSON object per line); progress goes to stderr. Secrets (API keys) are
printed once on stdout or written to a 0600 file (`--key-file`), never to a log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import orjson

from .settings import ConfigError, Settings

PAGE = 100
UNEXPECTED_FIX = "rerun with --debug for the traceback and report it"


class Failure(Exception):
    """A runtime failure the command explains: one line, `cause: fix`."""

    def __init__(self, cause: str, fix: str, status: int = 1):
        super().__init__(f"{cause}: {fix}")
        self.cause = cause
        self.fix = fix
        self.status = status


def package_version() -> str:
    try:
        return version("vaultgraph")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout without install
        return "unknown"


# -- output -------------------------------------------------------------------------------------

def emit(value) -> None:
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.write(orjson.dumps(value, default=str).decode() + "\n")
        sys.stdout.flush()


def _write_secret(path: Path, text: str) -> None:
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


# -- settings and resources ---------------------------------------------------------------------

def local_neo4j(settings: Settings):
    from .neo4j_local import LocalNeo4j

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
    from .crypto import KeyRing

    if settings.kek or settings.kek_path.exists():
        return
    _write_secret(settings.kek_path, KeyRing.generate_spec())
    print(f"generated a development key-encryption key into {settings.kek_path} (mode 0600); "
          "production sets VAULTGRAPH_KEK or VAULTGRAPH_KEK_FILE", file=sys.stderr)


def check_kek(settings: Settings):
    """The key ring, parsed now so a malformed one is named before anything starts."""
    from .crypto import KeyRing

    spec = settings.resolved_kek()
    try:
        return KeyRing.from_spec(spec)
    except ValueError as exc:  # the message names an entry by position, never key bytes
        raise Failure(f"the key-encryption key in {settings.kek_source} is malformed ({exc})",
                      "expected '<version>:<base64url of 32 bytes>[,...]', e.g. "
                      "k1:$(head -c32 /dev/urandom | basenc --base64url)") from None


def _local_settings(settings: Settings, neo) -> Settings:
    """Point the service at the local server's password file when none is configured."""
    if settings.neo4j_password:
        return settings
    return dataclasses.replace(settings, neo4j_password=neo.resolve_password())


def services(settings: Settings, *, with_keys: bool = True):
    from .wiring import open_services

    if with_keys:
        check_kek(settings)
    settings.resolved_neo4j_password()  # a missing password is named before connecting
    return open_services(settings, with_keys=with_keys, schema_required=True)


def run_async(work):
    return asyncio.run(work())


# -- serve and the local Neo4j -------------------------------------------------------------------

def create_tenant(settings: Settings, name: str) -> dict:
    async def work():
        async with services(settings) as svc:
            return (await svc.tenants.create(name)).to_dict()

    return run_async(work)


def bootstrap(settings: Settings) -> None:
    """First run only: a tenant whose management key goes to a 0600 file, and to the terminal
    once if stderr is one (never into a log: a redirected stderr gets the file name only)."""
    key_file = settings.home_path / "admin.key"
    if key_file.exists():
        print(f"admin key: {key_file} (created on first run)", file=sys.stderr)
        return
    created = create_tenant(settings, "default")
    _write_secret(key_file, created["key"])
    (settings.home_path / "admin.json").write_text(orjson.dumps(
        {"tenant_id": created["tenant_id"], "application_id": created["application_id"]}
    ).decode() + "\n")
    shown = (f"  admin key      {created['key']}\n  (shown once; also written to {key_file}, "
             "mode 0600)") if sys.stderr.isatty() else (
        f"  admin key      in {key_file} (mode 0600; not printed: stderr is not a terminal)")
    print("bootstrapped tenant 'default':\n"
          f"  tenant_id      {created['tenant_id']}\n"
          f"  application_id {created['application_id']}\n" + shown, file=sys.stderr)


def serve(settings: Settings, *, local: bool, workers: int | None = None) -> int:
    from .logging_setup import configure
    from .neo4j_local import port_in_use
    from .server import run

    if workers is not None:
        settings = dataclasses.replace(settings, workers=workers)
    configure(settings.log_level, settings.log_format, settings.log_coalesce_interval)
    if port_in_use(settings.port, settings.host):
        raise Failure(f"port {settings.port} on {settings.host} is in use by another process",
                      "stop that process or set VAULTGRAPH_PORT to a free port")
    neo = started = None
    if local:
        ensure_dev_kek(settings)
    check_kek(settings)
    try:
        if local:
            neo = local_neo4j(settings)
            started = neo.start()
            settings = _local_settings(settings, neo)
            bootstrap(settings)
        # The Browser exists only where the local launcher's Neo4j serves it.
        browser = (f", Neo4j Browser at http://127.0.0.1:{settings.neo4j_http_port}/browser/"
                   if local else "")
        print(f"serving on http://{settings.host}:{settings.port} (docs at /docs{browser})",
              file=sys.stderr)
        return run(settings)
    finally:
        # Whatever this call started, it stops: a failed bootstrap leaves no orphan server.
        if started:
            neo.stop()


def neo4j_command(settings: Settings, action: str, command: list[str]) -> int:
    neo = local_neo4j(settings)
    if action == "start":
        neo.start()
    elif action == "stop":
        neo.stop()
    elif action == "status":
        status = neo.status()
        print(orjson.dumps(status, option=orjson.OPT_INDENT_2).decode())
        return 0 if status["running"] else 3
    elif action == "run":
        # Start (unless running), run the command against it, stop it if this call started it.
        ensure_dev_kek(settings)
        started = neo.start()
        env = {**os.environ, "VAULTGRAPH_NEO4J_URI": neo.uri,
               "VAULTGRAPH_NEO4J_PASSWORD": neo.resolve_password(),
               "VAULTGRAPH_HOME": str(settings.home_path)}
        try:
            return subprocess.call(command, env=env)  # noqa: S603 - the caller's own command
        finally:
            if started:
                neo.stop()
    return 0


# -- tenants, applications, keys, audit ----------------------------------------------------------

def tenants_command(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "create":
        with KeyOutput.open(args.key_file) as out:
            emit(out.deliver(create_tenant(settings, args.name)))
        return 0

    async def work():
        async with services(settings) as svc:
            if args.action == "show":
                emit(await svc.tenants.get(args.tenant_id))
                return
            after = ""
            while rows := await svc.tenants.page(after, PAGE):
                for row in rows:
                    emit(row)
                after = rows[-1]["id"]

    run_async(work)
    return 0


def _parse_rules(rules: list[str]) -> list:
    try:
        raw = [orjson.loads(rule) for rule in rules]
    except orjson.JSONDecodeError:
        raise Failure("every --rule must be a JSON object", "see vaultgraph applications "
                      "create --help", status=2) from None
    return raw


def applications_command(settings: Settings, args: argparse.Namespace) -> int:
    from .applications.view import application_body, key_body
    from .services.applications import operator, parse_draft

    caller = operator(args.tenant)
    draft = (parse_draft({"name": args.name, "permissions": args.permission,
                          "rules": _parse_rules(args.rule)})
             if args.action == "create" else None)

    async def work(out: KeyOutput):
        async with services(settings, with_keys=False) as svc:
            apps = svc.applications
            if args.action == "create":
                app, key = await apps.create(args.tenant, draft, grantor=None)
                return out.deliver({"application_id": app.id, "key": key})
            if args.action == "show":
                app = await apps.get(caller, args.application_id)
                keys = await apps.keys(caller, args.application_id)
                return {**application_body(app), "keys": [key_body(k) for k in keys]}
            if args.action == "list":
                cursor = None
                while True:
                    page, cursor = await apps.page(caller, PAGE, cursor)
                    for app in page:
                        emit(application_body(app))
                    if cursor is None:
                        return None
            if args.action == "revoke-key":
                await apps.revoke_key(caller, args.application_id, args.key_id)
                return {"application_id": args.application_id, "revoked": [args.key_id]}
            # rotate-key: a new key first, delivered (its file written), then the old ones
            # revoked (unless --keep-old). A revoke that fails still prints the new key (with
            # what was revoked): the application never loses every key someone holds.
            old = await apps.keys(caller, args.application_id)
            info, key = await apps.create_key(caller, args.application_id)
            revoked: list[str] = []
            result = out.deliver({"application_id": args.application_id, "key_id": info.id,
                                  "key": key, "revoked": revoked})
            try:
                for k in [] if args.keep_old else old:
                    await apps.revoke_key(caller, args.application_id, k.id)
                    revoked.append(k.id)
            except BaseException:
                emit(result)
                raise
            return result

    with KeyOutput.open(getattr(args, "key_file", None)) as out:
        result = run_async(lambda: work(out))
    if result is not None:
        emit(result)
    return 0


def add_kek_version(settings: Settings) -> str:
    """Append a new key version to the key file (atomically, 0600, durable before any tenant is
    re-wrapped under it); the new one is active. The caller holds `rotation_lock`, and the
    ring is read here, under it: two rotations never both add the same version."""
    from .crypto import KeyRing

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
    _write_secret(tmp, f"{spec},{entry}")
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


def keys_command(settings: Settings, args: argparse.Namespace) -> int:
    check_kek(settings)
    with rotation_lock(settings):
        return _rotate(settings, args)


def _rotate(settings: Settings, args: argparse.Namespace) -> int:
    ring = check_kek(settings)  # again, under the lock: another rotation may have added one
    only = set(args.tenant) if args.tenant else None

    async def pending():
        from .errors import NotFound

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


def _moment(value: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise Failure(f"{name} is not an ISO 8601 date or time",
                      "use e.g. 2026-01-31 or 2026-01-31T12:00:00Z", status=2) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def audit_command(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "verify":
        progress = Progress("verified events")
        count = 0

        def step(n: int) -> None:
            nonlocal count
            count += n
            progress(count)

        async def verify():
            from .errors import NotFound

            async with services(settings) as svc:
                try:
                    return await svc.audit_log.verify(
                        step, chains=set(args.chain) if args.chain else None)
                except NotFound as exc:
                    raise Failure(exc.detail.rstrip("."), "the chain ids are the \"chain\" "
                                  "of the events vaultgraph audit export writes") from None

        findings = run_async(verify)
        progress.done(f"{count} checked, {len(findings)} finding(s)")
        for finding in findings:
            emit({"kind": finding.kind, "chain": finding.chain, "seq": finding.seq,
                  "event_id": finding.event_id})
        if findings:
            raise Failure(f"the audit trail fails verification ({len(findings)} finding(s), "
                          "listed on stdout)", "investigate the named events; the trail was "
                          "changed outside the service")
        return 0

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
        try:
            n = run_async(lambda: export(sys.stdout.buffer))
            sys.stdout.flush()
        except BrokenPipeError:
            # The reader stopped reading (`| head`): stop quietly, with the status of a writer
            # ended by SIGPIPE; stdout goes to /dev/null so the exit's flush says nothing.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + signal.SIGPIPE
    progress.done(f"{n} written" + (f" to {args.out}" if args.out else ""))
    return 0


# -- failures -------------------------------------------------------------------------------------

def explain(exc: BaseException, settings: Settings | None) -> tuple[str, str, int]:
    """The one line for a failure: what went wrong and what to do, and the exit status."""
    from marshmallow import ValidationError
    from neo4j.exceptions import AuthError, ClientError, ServiceUnavailable

    from .crypto import CryptoError
    from .errors import Invalid, Misconfigured, Unavailable, VaultError, WrongKey
    from .neo4j_local import LauncherError

    uri = settings.neo4j_uri if settings else "the configured URI"
    if isinstance(exc, Failure):
        return exc.cause, exc.fix, exc.status
    if isinstance(exc, (ConfigError, LauncherError)):
        return exc.cause, exc.fix, 1
    # The repository reports refused credentials as Misconfigured (its cause is the AuthError).
    if isinstance(exc, Misconfigured) and isinstance(exc.__cause__, AuthError):
        exc = exc.__cause__
    if isinstance(exc, WrongKey):
        exc = CryptoError("the key ring opens none of the stored tenant keys")
    if isinstance(exc, AuthError):
        where = settings.local_password_file() if settings else None
        unset = (f"unset, the local server's password file {where} is used" if where
                 else "the user is VAULTGRAPH_NEO4J_USER")
        return (f"Neo4j at {uri} refused the password",
                f"set VAULTGRAPH_NEO4J_PASSWORD to this database's password ({unset})", 1)
    if isinstance(exc, ClientError) and exc.code == "Neo.ClientError.Database.DatabaseNotFound":
        name = settings.neo4j_database if settings else "configured"
        return (f"Neo4j at {uri} has no database {name!r}",
                "set VAULTGRAPH_NEO4J_DATABASE to an existing database (Community has 'neo4j')",
                1)
    if isinstance(exc, (Unavailable, ServiceUnavailable)):
        return (f"cannot reach Neo4j at {uri}",
                "start it (vaultgraph neo4j start) or set VAULTGRAPH_NEO4J_URI to a running "
                "server", 1)
    if isinstance(exc, CryptoError):
        source = settings.kek_source if settings else "the key ring"
        return (f"the key-encryption key ring in {source} cannot unwrap the stored tenant keys",
                "use the key ring the tenants were created with", 1)
    if isinstance(exc, ValidationError):
        messages = orjson.dumps(exc.normalized_messages(), option=orjson.OPT_NON_STR_KEYS)
        return f"invalid input {messages.decode()}", "see --help for the expected values", 2
    if isinstance(exc, Invalid) and exc.errors:
        return (f"{exc.detail} {orjson.dumps(exc.errors).decode()}",
                "see --help for the expected values", 2)
    if isinstance(exc, VaultError):
        return exc.detail.rstrip("."), "check the ids (vaultgraph tenants list, vaultgraph " \
            "applications list --tenant ID)", 1
    if isinstance(exc, PermissionError):
        return (f"permission denied on {exc.filename}",
                "run as the user that owns VAULTGRAPH_HOME or set VAULTGRAPH_HOME", 1)
    if isinstance(exc, OSError) and exc.errno == 98 and settings:
        return (f"port {settings.port} on {settings.host} is in use by another process",
                "stop that process or set VAULTGRAPH_PORT to a free port", 1)
    return f"unexpected {type(exc).__name__}", UNEXPECTED_FIX, 1


# -- arguments ------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vaultgraph", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"vaultgraph {package_version()}")
    parser.add_argument("--debug", action="store_true",
                        help="on failure, show the traceback instead of one line")
    sub = parser.add_subparsers(dest="command", required=True)

    p_serve = sub.add_parser("serve", help="serve the API")
    p_serve.add_argument("--local-neo4j", action="store_true",
                         help="start the local Neo4j (and stop it on exit), bootstrap on first run")
    p_serve.add_argument("--workers", type=int, metavar="N",
                         help="serve with N processes on one port (SO_REUSEPORT); 0: one per CPU "
                              "this process may use; default VAULTGRAPH_WORKERS or 1")

    p_neo = sub.add_parser("neo4j", help="the local Neo4j server")
    p_neo.add_argument("action", choices=["start", "stop", "status", "run"])
    p_neo.add_argument("cmd", nargs=argparse.REMAINDER,
                       help="with run: the command to run against it (after --)")

    p_ten = sub.add_parser("tenants", help="tenants")
    ten = p_ten.add_subparsers(dest="action", required=True)
    p = ten.add_parser("create", help="create a tenant and its management application; prints "
                       "tenant_id, application_id and key (once)")
    p.add_argument("--name", required=True)
    p.add_argument("--key-file", metavar="PATH",
                   help="write the key to this new 0600 file instead of stdout")
    ten.add_parser("list", help="every tenant, one JSON object per line")
    p = ten.add_parser("show", help="one tenant")
    p.add_argument("tenant_id")

    p_app = sub.add_parser("applications", help="applications and their API keys")
    app = p_app.add_subparsers(dest="action", required=True)
    p = app.add_parser("create",
                       help="create an application in a tenant; prints its id and its key (once)")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p.add_argument("--name", required=True)
    p.add_argument("--permission", action="append", default=[], metavar="P",
                   help="a permission, e.g. token:read (repeat for more)")
    p.add_argument("--rule", action="append", default=[], metavar="JSON",
                   help='an access rule, e.g. \'{"container": "/pci/", "transform": "mask", '
                        '"permissions": ["token:read"]}\' (repeat for more)')
    p.add_argument("--key-file", metavar="PATH",
                   help="write the key to this new 0600 file instead of stdout")
    p = app.add_parser("list", help="a tenant's applications, one JSON object per line")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p = app.add_parser("show", help="one application with its working keys (ids only)")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p.add_argument("application_id")
    p = app.add_parser("revoke-key", help="revoke one key of an application")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p.add_argument("application_id")
    p.add_argument("key_id")
    p = app.add_parser("rotate-key", help="issue a new key (printed once) and revoke the old ones")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p.add_argument("application_id")
    p.add_argument("--keep-old", action="store_true",
                   help="keep the old keys working (revoke them later with revoke-key)")
    p.add_argument("--key-file", metavar="PATH",
                   help="write the key to this new 0600 file instead of stdout")

    p_keys = sub.add_parser("keys", help="key-encryption keys")
    keys = p_keys.add_subparsers(dest="action", required=True)
    p = keys.add_parser("rotate", help="add a new key-encryption key to the key file and "
                        "re-wrap every tenant's keys under it, online; resumes an unfinished "
                        "rotation instead of adding another key")
    p.add_argument("--tenant", action="append", metavar="ID",
                   help="only this tenant (repeat for more); default: every tenant")

    p_audit = sub.add_parser("audit", help="the audit trail")
    audit = p_audit.add_subparsers(dest="action", required=True)
    p = audit.add_parser("verify", help="check every chain; findings as JSON lines, exit 1 if "
                         "any")
    p.add_argument("--chain", action="append", metavar="ID",
                   help="only this chain (repeat for more); default: every chain")
    p = audit.add_parser("export", help="events as JSON lines, oldest first")
    p.add_argument("--since", help="ISO 8601 date or time (inclusive); default: the beginning")
    p.add_argument("--until", help="ISO 8601 date or time (exclusive); default: now")
    p.add_argument("--out", metavar="FILE", help="write to FILE (mode 0600) instead of stdout")
    return parser


def dispatch(settings: Settings, args: argparse.Namespace) -> int:
    if args.command == "serve":
        return serve(settings, local=args.local_neo4j, workers=args.workers)
    if args.command == "neo4j":
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        return neo4j_command(settings, args.action, cmd)
    if args.command == "tenants":
        return tenants_command(settings, args)
    if args.command == "applications":
        return applications_command(settings, args)
    if args.command == "keys":
        return keys_command(settings, args)
    return audit_command(settings, args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.debug and args.command != "serve":
        # The driver and the repositories log each failed attempt; the one line below says it.
        logging.disable(logging.ERROR)
    settings = None
    try:
        settings = Settings.from_env()
        return dispatch(settings, args)
    except KeyboardInterrupt:
        print("vaultgraph: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        cause, fix, status = explain(exc, settings)
        print(f"vaultgraph: {cause}: {fix}", file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
