"""The `vaultgraph` command: serve, run a local Neo4j, manage tenants, applications, keys and the
audit trail (docs/operations.md, "Command line").

Every runtime failure is one line on stderr, `vaultgraph: <cause>: <what to do>`, with exit status
1 (2 for usage errors); `--debug` shows the traceback instead. Commands that create or list print
JSON on stdout (lists: one JSON object per line); progress goes to stderr. Secrets (API keys) are
printed once on stdout or written to a 0600 file (`--key-file`), never to a log.

One module per command group, each with its `add_parser(sub)` and `command(settings, args)`;
what they share is in `common`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, version

from ..documentation import page
from ..failures import explain
from ..settings import Settings
from . import applications, audit, keys, neo4j, serve, tenants

COMMANDS = {"serve": serve, "neo4j": neo4j, "tenants": tenants, "applications": applications,
            "keys": keys, "audit": audit}


def package_version() -> str:
    try:
        return version("vaultgraph")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout without install
        return "unknown"


class _Formatter(argparse.HelpFormatter):
    """Help text wrapped at spaces only: a documentation pointer (a path, hyphens and all)
    stays on one line, whole, to be copied."""

    def _split_lines(self, text, width):
        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width,
                             break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text, width, indent):
        return "\n".join(indent + line for line in self._split_lines(text, width - len(indent)))


class _Parser(argparse.ArgumentParser):
    """The command's parser; its subcommands' parsers are of this class too (argparse makes
    them with the parent's class), so every help text wraps the same way."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vaultgraph", description=(
        "The `vaultgraph` command: serve, run a local Neo4j, manage tenants, applications, keys "
        f"and the audit trail ({page('operations.md', 'Command line')})."))
    parser.add_argument("--version", action="version", version=f"vaultgraph {package_version()}")
    parser.add_argument("--debug", action="store_true",
                        help="on failure, show the traceback instead of one line")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def dispatch(settings: Settings, args: argparse.Namespace) -> int:
    return COMMANDS[args.command].command(settings, args)


def closed_stdout() -> int:
    """The reader of stdout went away (`| head`): every command stops quietly, with the status
    of a writer SIGPIPE ended (128 + 13); stdout goes to /dev/null so the exit's flush of what
    is left says nothing."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 128 + signal.SIGPIPE


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.debug and args.command != "serve":
        # The driver and the repositories log each failed attempt; the one line below says it.
        logging.disable(logging.ERROR)
    settings = None
    try:
        settings = Settings.from_env()
        status = dispatch(settings, args)
        sys.stdout.flush()  # a closed stdout is met here, not in the interpreter's exit
        return status
    except KeyboardInterrupt:
        print("vaultgraph: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return closed_stdout()
    except Exception as exc:
        if args.debug:
            raise
        cause, fix, status = explain(exc, settings)
        print(f"vaultgraph: {cause}: {fix}", file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
