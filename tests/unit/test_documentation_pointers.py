"""Every pointer to the documentation that the command line prints names a file that exists:
the installed page (the pages ship in the wheel as vaultgraph/docs; tests/packaging/test_wheel.py
runs the installed command), or docs/ in a checkout. A pointer relative to a checkout
(`docs/operations.md`) means nothing to a wheel's user."""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from pathlib import Path

from vaultgraph import documentation
from vaultgraph.cli import build_parser
from vaultgraph.keys.custody import DEVELOPMENT_ONLY
from vaultgraph.keys.pkcs11 import TokenError
from vaultgraph.settings import PROJECT_ROOT

PAGE = re.compile(r"[^\s(]+\.md\b")
# Strings that name docs/ pages and that the command line never prints: the HTTP document's
# descriptions (served at /openapi.json) and a comment in the neo4j.conf the launcher writes.
NOT_PRINTED = ("vaultgraph/api/", "vaultgraph/search/schemas.py", "vaultgraph/neo4j_local.py")


def helps(parser: argparse.ArgumentParser) -> Iterator[str]:
    """The help of the parser and of every subcommand under it."""
    yield parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from helps(child)


def printed() -> list[str]:
    return [*helps(build_parser()), DEVELOPMENT_ONLY, str(TokenError("no token"))]


def test_every_printed_pointer_is_a_file_that_exists():
    pointers = [page for text in printed() for page in PAGE.findall(text)]
    assert len(pointers) >= 5  # the command's own help, tenants, neo4j dump, and the key custody
    for pointer in pointers:
        assert Path(pointer).is_absolute(), pointer
        assert Path(pointer).is_file(), pointer


def test_a_pointer_names_the_shipped_page_when_there_is_one(tmp_path, monkeypatch):
    assert documentation.page("operations.md") == str(PROJECT_ROOT / "docs" / "operations.md")
    (tmp_path / "operations.md").write_text("# Operations\n")
    monkeypatch.setattr(documentation, "SHIPPED", tmp_path)
    assert documentation.page("operations.md", "Command line") == (
        f'{tmp_path / "operations.md"}, "Command line"')


def test_help_keeps_a_pointer_whole_on_one_line():
    text = build_parser().format_help()
    assert str(PROJECT_ROOT / "docs" / "operations.md") in text


def test_no_printed_string_names_a_page_by_its_place_in_a_checkout():
    found = []
    for path in sorted((PROJECT_ROOT / "vaultgraph").rglob("*.py")):
        name = path.relative_to(PROJECT_ROOT).as_posix()
        if name.startswith(NOT_PRINTED):
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                           ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        found += [f"{name}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docstrings and "docs/" in node.value]
    assert found == []
