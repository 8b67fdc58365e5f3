"""`vaultgraph serve`: the API, with the local Neo4j (`--local-neo4j`) and a first run's
bootstrap."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import logging
import os
import socket
import sys

import orjson

from ..failures import Failure
from ..neo4j_local import bind_refusal
from ..settings import Settings, workers_beside_neo4j
from . import common
from .tenants import tenant_maker


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="serve the API")
    p.add_argument("--local-neo4j", action="store_true",
                   help="start the local Neo4j (and stop it on exit), bootstrap on first run")
    p.add_argument("--workers", type=_workers, metavar="N",
                   help="serve with N processes on one port (SO_REUSEPORT); 0: one per CPU "
                        "this process may use, half of them with --local-neo4j; default "
                        "VAULTGRAPH_WORKERS or 1")


def _workers(text: str) -> int:
    """`--workers`: a whole number of 0 or more (a usage error otherwise, naming the flag)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 0 or more (0: one "
                                         "per CPU)")
    return value


def check_listen(host: str, port: int, host_setting: str, in_use: Exception) -> None:
    """Refuse, before anything starts, an address this machine cannot listen on (`host` does
    not resolve or is not one of its own: named as `host_setting`) or a port another process
    holds (`in_use`). Binding is the test: no SO_REUSEPORT, so a port shared that way counts
    as held."""
    not_here = Failure(f"{host_setting} is {host!r}, not an address of this machine",
                       f"set {host_setting} to an address or host name of this machine "
                       "(127.0.0.1; 0.0.0.0 for every interface)")
    try:
        refusal = bind_refusal(host, port)
    except (socket.gaierror, UnicodeError):
        raise not_here from None
    if refusal == errno.EADDRINUSE:
        raise in_use
    if refusal == errno.EADDRNOTAVAIL:
        raise not_here
    if refusal is not None:
        raise OSError(refusal, os.strerror(refusal), f"{host}:{port}")


def check_listeners(settings: Settings) -> None:
    """The API's address and port, and the metrics listener's when there is one."""
    from ..api.metrics import in_use

    check_listen(settings.host, settings.port, "VAULTGRAPH_HOST", Failure(
        f"port {settings.port} on {settings.host} is in use by another process",
        "stop that process or set VAULTGRAPH_PORT to a free port"))
    if settings.metrics_port:
        check_listen(settings.metrics_host, settings.metrics_port, "VAULTGRAPH_METRICS_HOST",
                     in_use(settings.metrics_host, settings.metrics_port))


def command(settings: Settings, args: argparse.Namespace) -> int:
    return serve(settings, local=args.local_neo4j, workers=args.workers)


def bootstrap(settings: Settings) -> None:
    """First run only, on a store with no tenant at all: a tenant whose management key goes to
    a 0600 file, and to the terminal once if stderr is one (never into a log: a redirected
    stderr gets the file name only). A store that holds tenants gets none, whether or not the
    key file is still there: an operator who moved it off the machine did not ask for a second
    tenant with a new key that may do everything."""
    key_file = settings.home_path / "admin.key"
    if key_file.exists():
        print(f"admin key: {key_file} (created on first run)", file=sys.stderr)
        return
    created = _first_tenant(settings)
    if created is None:
        print(f"admin key: {key_file} is absent and tenants exist, so none was bootstrapped "
              "(vaultgraph tenants create makes another)", file=sys.stderr)
        return
    common.write_secret(key_file, created["key"])
    (settings.home_path / "admin.json").write_text(orjson.dumps(
        {"tenant_id": created["tenant_id"], "application_id": created["application_id"]}
    ).decode() + "\n")
    shown = (f"  admin key      {created['key']}\n  (shown once; also written to {key_file}, "
             "mode 0600)") if sys.stderr.isatty() else (
        f"  admin key      in {key_file} (mode 0600; not printed: stderr is not a terminal)")
    print("bootstrapped tenant 'default':\n"
          f"  tenant_id      {created['tenant_id']}\n"
          f"  application_id {created['application_id']}\n" + shown, file=sys.stderr)


def _first_tenant(settings: Settings) -> dict | None:
    """The tenant 'default', made only when the store holds no tenant (None otherwise), with
    the audit event `tenants create` leaves (route `CLI serve`). Made but its event not linked,
    the tenant stands and its key is still written: one line says so (`audit verify` names the
    event unlinked)."""
    from ..audit.command import Affected, CommandTrail, EventNotLinked
    from ..auth.permissions import APPLICATION_CREATE

    async def work():
        async with common.services(settings) as svc:
            if await svc.tenants.page("", 1):
                return None
            try:
                return await CommandTrail(svc.audit_writer, "serve").change(
                    APPLICATION_CREATE, Affected(), tenant_maker(svc, "default"), status=201)
            except EventNotLinked as exc:
                cause, _ = exc.explained()
                print(f"vaultgraph: warning: bootstrapping tenant 'default': {cause}",
                      file=sys.stderr)
                return exc.result

    return common.run_async(work)


def with_workers(settings: Settings, *, local: bool, workers: int | None) -> Settings:
    """`settings` with the processes to run: `--workers` over VAULTGRAPH_WORKERS; 0 is one per
    CPU, or half the CPUs (at least one) when the local Neo4j shares the host."""
    if workers is not None:
        settings = dataclasses.replace(settings, workers=workers)
    if local and settings.workers == 0:
        settings = dataclasses.replace(settings, workers=workers_beside_neo4j())
    return settings


def serve(settings: Settings, *, local: bool, workers: int | None = None) -> int:
    from ..logging_setup import configure
    from ..server import run

    settings = with_workers(settings, local=local, workers=workers)
    configure(settings.log_level, settings.log_format, settings.log_coalesce_interval)
    # Both listeners are checked before Neo4j starts or a tenant is bootstrapped.
    check_listeners(settings)
    neo = started = None
    if local and settings.kek_provider == "file":
        common.ensure_dev_kek(settings)
    common.check_kek(settings)
    try:
        if local:
            neo = common.local_neo4j(settings)
            started = neo.start()
            settings = common.local_settings(settings, neo)
            bootstrap(settings)
        # The Browser exists only where the local launcher's Neo4j serves it.
        browser = (f", Neo4j Browser at http://127.0.0.1:{settings.neo4j_http_port}/browser/"
                   if local else "")
        if settings.kek_provider == "file":
            from ..keys.custody import DEVELOPMENT_ONLY

            logging.getLogger("vaultgraph.keys").info(DEVELOPMENT_ONLY)
        # Printed once the key-encryption key opened the stored tenant keys (by the supervisor,
        # once, with several workers): a wrong key is refused instead, never announced first.
        return run(settings, f"serving on http://{settings.host}:{settings.port} (docs at "
                             f"/docs{browser})")
    finally:
        # Whatever this call started, it stops: a failed bootstrap leaves no orphan server.
        if started:
            neo.stop()
