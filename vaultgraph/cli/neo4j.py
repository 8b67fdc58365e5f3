"""`vaultgraph neo4j`: start, stop, inspect the local Neo4j, or run a command against it.

Each action is a subcommand of its own: `--help` after any of them prints its help and does
nothing else, an option an action does not take is a usage error (exit 2), and only `run` takes
a command, which it needs (after `--`, or as the rest of the line)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess

import orjson

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
    actions = p.add_subparsers(dest="action", required=True, metavar="{start,stop,status,run}")
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


def command(settings: Settings, args: argparse.Namespace) -> int:
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
