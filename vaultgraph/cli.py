"""The `vaultgraph` command: serve, run a local Neo4j, create tenants and applications."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import orjson

from .settings import Settings


def _write_secret(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")


def local_neo4j(settings: Settings):
    from .neo4j_local import LocalNeo4j

    return LocalNeo4j(
        home=settings.home_path / "neo4j" if settings.neo4j_bolt_port == 7687
        else settings.home_path / f"neo4j-{settings.neo4j_bolt_port}",
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


def _local_settings(settings: Settings, neo) -> Settings:
    """Point the service at the local server's password file when none is configured."""
    if settings.neo4j_password:
        return settings
    return Settings(**{**settings.__dict__, "neo4j_password": neo.resolve_password()})


def create_tenant(settings: Settings, name: str) -> dict:
    from .wiring import open_services

    async def work():
        async with open_services(settings, schema_required=True) as services:
            return (await services.tenants.create(name)).to_dict()

    return asyncio.run(work())


def create_application(settings: Settings, tenant_id: str, name: str, permissions: list[str],
                       rules: list[str]) -> dict:
    """The operator's way in: the API's use case with no grantor, so no escalation check."""
    from marshmallow import ValidationError

    from .services.applications import parse_draft
    from .wiring import open_services

    try:
        raw_rules = [orjson.loads(rule) for rule in rules]
    except orjson.JSONDecodeError:
        raise ValidationError({"rules": ["every --rule must be a JSON object"]}) from None
    draft = parse_draft({"name": name, "permissions": permissions, "rules": raw_rules})

    async def work():
        async with open_services(settings, with_keys=False, schema_required=True) as services:
            app, key = await services.applications.create(tenant_id, draft, grantor=None)
            return {"application_id": app.id, "key": key}

    return asyncio.run(work())


def applications_command(settings: Settings, args: argparse.Namespace) -> int:
    from marshmallow import ValidationError

    from .errors import VaultError

    try:
        created = create_application(settings, args.tenant, args.name, args.permission,
                                     args.rule)
    except ValidationError as exc:
        messages = orjson.dumps(exc.normalized_messages(), option=orjson.OPT_NON_STR_KEYS)
        print(f"invalid application: {messages.decode()}", file=sys.stderr)
        return 2
    except ValueError as exc:  # settings: no database password, no key-encryption key
        print(f"vaultgraph: {exc}", file=sys.stderr)
        return 2
    except VaultError as exc:
        print(exc.detail, file=sys.stderr)
        return 1
    with contextlib.suppress(BrokenPipeError):
        print(orjson.dumps(created).decode())
    return 0


def bootstrap(settings: Settings) -> None:
    """First run only: a tenant whose management key is printed once and kept 0600."""
    key_file = settings.home_path / "admin.key"
    if key_file.exists():
        print(f"admin key: {key_file} (created on first run)", file=sys.stderr)
        return
    created = create_tenant(settings, "default")
    _write_secret(key_file, created["key"])
    (settings.home_path / "admin.json").write_text(orjson.dumps(
        {"tenant_id": created["tenant_id"], "application_id": created["application_id"]}
    ).decode() + "\n")
    print("bootstrapped tenant 'default':\n"
          f"  tenant_id      {created['tenant_id']}\n"
          f"  application_id {created['application_id']}\n"
          f"  admin key      {created['key']}\n"
          f"  (shown once; also written to {key_file}, mode 0600)", file=sys.stderr)


def serve(settings: Settings, *, local: bool, workers: int | None = None) -> int:
    from .logs import configure
    from .server import run

    if workers is not None:
        settings = Settings(**{**settings.__dict__, "workers": workers})
    configure(settings.log_level, settings.log_format, settings.log_coalesce_interval)
    neo = started = None
    if local:
        ensure_dev_kek(settings)
        neo = local_neo4j(settings)
        started = neo.start()
        settings = _local_settings(settings, neo)
        bootstrap(settings)
    try:
        print(f"serving on http://{settings.host}:{settings.port} "
              f"(docs at /docs, Neo4j Browser at http://127.0.0.1:{settings.neo4j_http_port}"
              "/browser/)", file=sys.stderr)
        return run(settings)
    finally:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vaultgraph", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="serve the API")
    p_serve.add_argument("--local-neo4j", action="store_true",
                         help="start the local Neo4j (and stop it on exit), bootstrap on first run")
    p_serve.add_argument("--workers", type=int, metavar="N",
                         help="serve with N processes on one port (SO_REUSEPORT); default "
                              "VAULTGRAPH_WORKERS or 1")
    p_neo = sub.add_parser("neo4j", help="the local Neo4j server")
    p_neo.add_argument("action", choices=["start", "stop", "status", "run"])
    p_neo.add_argument("cmd", nargs=argparse.REMAINDER,
                       help="with run: the command to run against it (after --)")
    p_ten = sub.add_parser("tenants", help="tenants")
    ten_sub = p_ten.add_subparsers(dest="action", required=True)
    p_tc = ten_sub.add_parser("create", help="create a tenant and its management application")
    p_tc.add_argument("--name", required=True)
    p_app = sub.add_parser("applications", help="applications and their API keys")
    app_sub = p_app.add_subparsers(dest="action", required=True)
    p_ac = app_sub.add_parser(
        "create", help="create an application in a tenant; prints its id and its key (once)")
    p_ac.add_argument("--tenant", required=True, help="the tenant id")
    p_ac.add_argument("--name", required=True)
    p_ac.add_argument("--permission", action="append", default=[], metavar="P",
                      help="a permission, e.g. token:read (repeat for more)")
    p_ac.add_argument("--rule", action="append", default=[], metavar="JSON",
                      help='an access rule, e.g. \'{"container": "/pci/", "transform": "mask", '
                           '"permissions": ["token:read"]}\' (repeat for more)')

    args = parser.parse_args(argv)
    settings = Settings.from_env()
    if args.command == "serve":
        return serve(settings, local=args.local_neo4j, workers=args.workers)
    if args.command == "neo4j":
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        return neo4j_command(settings, args.action, cmd)
    if args.command == "tenants":
        with contextlib.suppress(BrokenPipeError):
            print(orjson.dumps(create_tenant(settings, args.name)).decode())
        return 0
    if args.command == "applications":
        return applications_command(settings, args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
