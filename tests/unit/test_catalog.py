"""The Cypher catalog: every file is used, every name the code asks for exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vaultgraph.catalog import Catalog, expand
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
    # Each creates only what is missing, or drops only what is there (an index a later version
    # no longer keeps).
    assert all("IF NOT EXISTS" in s or (s.lstrip().startswith("DROP ") and " IF EXISTS" in s)
               for s in statements)


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


# -- fragments: the visibility predicate is written once -----------------------------------------

RAW = {p.relative_to(PROJECT_ROOT / "cypher").as_posix(): p.read_text()
       for p in (PROJECT_ROOT / "cypher").rglob("*.cypher")}


def code_lines(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//"))


def test_the_visibility_predicate_is_spelled_only_in_its_fragments():
    spelled = re.compile(r"NOT coalesce\(\w+\.expires_at|\.containers WHERE any\(")
    offenders = [name for name, text in RAW.items()
                 if not name.startswith("fragments/") and spelled.search(code_lines(text))]
    assert offenders == []


def test_every_statement_that_finds_tokens_for_a_caller_uses_the_fragment():
    statements = {n: code_lines(t) for n, t in RAW.items()
                  if not n.startswith(("fragments/", "schema/"))}
    marked = [n for n, text in statements.items()
              if re.search(r"@(visible|in_prefixes|all_in_prefixes)\(", text)]
    assert len(marked) >= 13
    # A statement that names the caller's prefixes any other way would bypass the fragment.
    assert [n for n, text in statements.items()
            if "prefixes" in text and n not in marked] == []


def test_fragments_expand_to_static_text_with_the_statements_names(catalog):
    get = catalog.text("tokens/get")
    assert "@" not in code_lines(get)
    assert ("NOT coalesce(t.expires_at <= datetime(), false) AND any(container_ IN "
            "t.containers WHERE any(prefix_ IN $prefixes WHERE") in get
    create = catalog.text("tokens/create")
    assert "any(prefix_ IN $parent_prefixes" in create and "$prefixes" not in create
    assert not any(n.startswith("fragments/") for n in catalog.names())
    # A fragment's second argument may name a variable ({param}): the dedup lock's release.
    for name, variable in (("tokens/delete", "fingerprint"), ("tokens/update", "was"),
                           ("expiry/sweep", "fingerprint")):
        text = catalog.text(name)
        assert "@release_dedup_lock" not in code_lines(text)
        assert f"MATCH (l:DedupLock {{tenant_id: t.tenant_id, type: t.type, fingerprint: " \
               f"{variable}}})" in text, name


def test_an_unknown_fragment_fails_at_load():
    with pytest.raises(KeyError, match="no_such"):
        expand("MATCH (t) WHERE @no_such(t) RETURN t", {})


def test_the_fragment_marker_is_the_only_template_syntax(catalog):
    # Loaded, no statement holds a marker or a placeholder of any template syntax: neither the
    # catalog's own (expanded) nor a `{{ }}` one (Cypher's map literals are `{key: ...}`).
    leftovers = re.compile(r"@\w+\(|\{\{|\}\}|\{(node|param|prefixes)\}")
    assert [n for n in catalog.names() if leftovers.search(code_lines(catalog.text(n)))] == []
    # In the files, the placeholders appear only in fragments, the markers only as markers.
    assert [n for n, text in RAW.items() if not n.startswith("fragments/")
            and re.search(r"\{(node|param|prefixes)\}", code_lines(text))] == []
