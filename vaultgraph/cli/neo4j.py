"""`vaultgraph neo4j`: start, stop, inspect the local Neo4j, or run a command against it."""

from __future__ import annotations

import argparse
import os
import subprocess

import orjson

from ..settings import Settings
from . import common


def add_parser(sub) -> None:
    p = sub.add_parser("neo4j", help="the local Neo4j server")
    p.add_argument("action", choices=["start", "stop", "status", "run"])
    p.add_argument("cmd", nargs=argparse.REMAINDER,
                   help="with run: the command to run against it (after --)")


def command(settings: Settings, args: argparse.Namespace) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    return neo4j_command(settings, args.action, cmd)


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
