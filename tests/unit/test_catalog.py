"""The Cypher catalog: every file is used, every name the code asks for exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vaultgraph.catalog import Catalog
from vaultgraph.settings import PROJECT_ROOT

CODE = PROJECT_ROOT / "vaultgraph"
# A statement name in code: "area/name" as a string literal.
NAME = re.compile(r"""["']([a-z_]+/[a-z0-9_]+)["']""")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load(PROJECT_ROOT / "cypher")


def names_in_code() -> set[str]:
    found: set[str] = set()
    for path in CODE.rglob("*.py"):
        found |= set(NAME.findall(path.read_text()))
    return found


def test_every_statement_file_is_used(catalog):
    used = names_in_code()
    unused = [n for n in catalog.names() if not n.startswith("schema/") and n not in used]
    assert unused == []


def test_every_name_the_code_asks_for_exists(catalog):
    areas = {n.split("/")[0] for n in catalog.names()}
    asked = {n for n in names_in_code() if n.split("/")[0] in areas}
    missing = sorted(asked - set(catalog.names()))
    assert missing == []


def test_unknown_name_fails_at_once(catalog):
    with pytest.raises(KeyError):
        catalog["tokens/no_such_statement"]


def test_schema_statements_are_idempotent(catalog):
    statements = catalog.schema_statements()
    assert statements
    assert all("IF NOT EXISTS" in s for s in statements)


def test_no_statement_is_built_from_input():
    # Query text only ever comes from the catalog: no f-strings or .format near a query call.
    offenders = []
    for path in CODE.rglob("*.py"):
        text = path.read_text()
        for match in re.finditer(r"(execute_query|\.run)\(\s*f[\"']", text):
            offenders.append(f"{path.name}:{match.start()}")
    assert offenders == []


def test_cypher_files_carry_a_comment_saying_why():
    root = Path(PROJECT_ROOT / "cypher")
    bare = [str(p.relative_to(root)) for p in root.rglob("*.cypher")
            if not p.read_text().lstrip().startswith("//")]
    assert bare == []
