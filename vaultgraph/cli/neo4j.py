"""`vaultgraph neo4j`: start, stop, inspect the local Neo4j, run a command against it, or dump
its database to a file and load one back (docs/operations.md, "Backup and restore").

Each action is a subcommand of its own: `--help` after any of them prints its help and does
nothing else, an option an action does not take is a usage error (exit 2), and only `run` takes
a command, which it needs (after `--`, or as the rest of the line)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson

from ..documentation import page
from ..failures import Failure
from ..settings import Settings
from . import common

RUN_EXAMPLE = "vaultgraph neo4j run -- pytest -q"


class _Command(argparse.Action):
    """`run`'s command: the rest of the line, a leading `--` dropped; none is a usage error."""

    def __call__(self, parser, namespace, values, option_string=None):
        command = values[1:] if values[:1] == ["--"] else values
        if not command:
            parser.error(f"a command to run is required, as in {RUN_EXAMPLE}")
        setattr(namespace, self.dest, command)


def add_parser(sub) -> None:
    p = sub.add_parser("neo4j", help="the local Neo4j server",
                       description="Start, stop or inspect the local Neo4j server, or run a "
                                   "command against it.")
    actions = p.add_subparsers(dest="action", required=True,
                               metavar="{start,stop,status,run,dump,load}")
    actions.add_parser("start", help="start the local server (nothing if it runs)",
                       description="Start the local Neo4j server; nothing if it runs.")
    actions.add_parser("stop", help="stop the local server",
                       description="Stop the local Neo4j server.")
    actions.add_parser("status", help="print the local server's state as JSON (exit 3: not "
                                      "running)",
                       description="Print the local Neo4j server's state as JSON; exit status "
                                   "3 when it is not running.")
    run = actions.add_parser("run", help="start the server, run a command against it, stop it",
                             description="Start the local Neo4j server (unless it runs), run "
                                         "CMD with VAULTGRAPH_NEO4J_URI and its password set, "
                                         "and stop the server again if this call started it. "
                                         f"Example: {RUN_EXAMPLE}")
    run.add_argument("cmd", nargs=argparse.REMAINDER, action=_Command, metavar="-- CMD",
                     help="the command to run and its arguments")
    dump = actions.add_parser("dump", help="write the database to a file (server stopped)",
                              description="Write the local server's database to one file with "
                                          "neo4j-admin, the server stopped. The dump holds "
                                          "ciphertext only: back up the key-encryption key with "
                                          f"it ({page('operations.md', 'Backup and restore')}).")
    dump.add_argument("--to", required=True, metavar="PATH", help="the file to write (mode 0600)")
    dump.add_argument("--force", action="store_true", help="replace PATH if it exists")
    dump.add_argument("--stop", action="store_true",
                      help="stop the running server for the dump and start it again after")
    load = actions.add_parser("load", help="replace the database with a dump (server stopped)",
                              description="Load a file written by `vaultgraph neo4j dump` into "
                                          "the local server's database with neo4j-admin, the "
                                          "server stopped; a database that fails to load is "
                                          "left as it was.")
    load.add_argument("--from", required=True, dest="source", metavar="PATH",
                      help="the dump file to load")
    load.add_argument("--force", action="store_true", help="replace the database there")
    load.add_argument("--stop", action="store_true",
                      help="stop the running server for the load and start it again after")


def command(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "dump":
        return dump(settings, Path(args.to), force=args.force, stop=args.stop)
    if args.action == "load":
        return load(settings, Path(args.source), force=args.force, stop=args.stop)
    return neo4j_command(settings, args.action, getattr(args, "cmd", []))


def neo4j_command(settings: Settings, action: str, command: list[str]) -> int:
    neo = common.local_neo4j(settings)
    if action == "start":
        neo.start()
    elif action == "stop":
        neo.stop()
    elif action == "status":
        status = neo.status()
        print(orjson.dumps(status, option=orjson.OPT_INDENT_2).decode())
        return 0 if status["running"] else 3
    elif action == "run":
        # A command that cannot be run is named before a server is started for it.
        if shutil.which(command[0]) is None:
            raise Failure(f"cannot run {command[0]!r}: no such command, or not executable",
                          f"name a command on PATH or a path to one, as in {RUN_EXAMPLE}",
                          127)
        # Start (unless running), run the command against it, stop it if this call started it.
        common.ensure_dev_kek(settings)
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


def dump(settings: Settings, target: Path, *, force: bool, stop: bool) -> int:
    target = target.expanduser().absolute()
    if target.is_dir():
        raise Failure(f"{target} is a directory", "name a file for --to (a dump is one file)")
    if target.exists() and not force:
        raise Failure(f"{target} exists", "name a new file, or pass --force to replace it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Failure(f"cannot create the directory {target.parent} ({exc.strerror})",
                      "name a file in a writable directory for --to") from None
    neo = common.local_neo4j(settings)
    database = settings.neo4j_database
    _refuse_running(neo, "dump", stop)
    started = time.monotonic()
    with _stopped(neo) as restarted:
        size = neo.dump(database, target, replace=force)
    shown = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"
    print(f"wrote the database {database!r} to {target} ({shown}) in "
          f"{time.monotonic() - started:.0f}s. It holds ciphertext only: keep "
          f"{_key_ring(settings)} with it (a restore needs both)", file=sys.stderr)
    common.emit({"database": database, "dump": str(target), "bytes": size,
                 "restarted": bool(restarted)})
    return 0


def load(settings: Settings, source: Path, *, force: bool, stop: bool) -> int:
    source = source.expanduser().absolute()
    if not source.is_file():
        raise Failure(f"{source} is not a file", "name a file vaultgraph neo4j dump wrote")
    neo = common.local_neo4j(settings)
    database = settings.neo4j_database
    _refuse_running(neo, "load", stop)
    if neo.has_database(database) and not force:
        raise Failure(f"the local Neo4j in {neo.home} has a database {database!r}",
                      "pass --force to replace it with the dump")
    with _stopped(neo) as restarted:
        replaced = neo.load(database, source, replace=force)
    print(f"loaded {source} into the database {database!r}"
          + (" (the one there is replaced)" if replaced else "")
          + f"; with {_key_ring(settings)} of the dump configured, check it: vaultgraph keys "
          "status, vaultgraph audit verify", file=sys.stderr)
    common.emit({"database": database, "loaded": str(source), "replaced": replaced,
                 "restarted": bool(restarted)})
    return 0


def _refuse_running(neo, action: str, stop: bool) -> None:
    """A dump or load needs the server stopped: refused while it runs, unless `stop`."""
    pid = neo.running_pid()
    if pid is not None and not stop:
        raise Failure(f"the local Neo4j is running (pid {pid}) and a {action} needs it stopped",
                      "stop it first (vaultgraph neo4j stop; stop the service that uses it "
                      f"before a load), or pass --stop to stop it for the {action} and start it "
                      "again after")


@contextlib.contextmanager
def _stopped(neo):
    """The server stopped meanwhile, and started again after when it ran (whether the work
    succeeded or not: a failed dump or load leaves the database as it was); the value is
    whether it ran."""
    was_running = neo.stop()
    try:
        yield was_running
    finally:
        if was_running:
            neo.start()


def _key_ring(settings: Settings) -> str:
    """Where the key-encryption key lives, as the reminder after a dump or load names it."""
    if settings.kek_provider == "pkcs11":
        return (f"the keys of the PKCS#11 token {settings.pkcs11_token_label!r} (and any key "
                "file still configured)")
    if settings.kek:
        return "the key ring of VAULTGRAPH_KEK"
    return f"the key file {settings.kek_path}"
