"""The Cypher catalog: every statement is a file `cypher/<area>/<name>.cypher`, loaded once.

Code asks for a statement by name (`catalog["tokens/create"]`); an unknown name fails at once.
Values always travel as `$parameters`; nothing here builds query text from input.

Fragments (`cypher/fragments/<name>.cypher`) are predicates several statements share, such as
which tokens a caller may see. This is the catalog's one template mechanism, and the only
syntax of its kind in a .cypher file (distinct from the Liquid `{{ }}` of token templates,
which never meets Cypher):
- a statement writes `@name(node)` or `@name(node, param)`, e.g. `@visible(t)` or
  `@in_prefixes(p, parent_prefixes)`; loading replaces the marker with the fragment's text;
- in a fragment, `{node}` stands for the statement's variable and `{param}` for the second
  argument (default `prefixes`: a parameter name after `$`, or a variable); a fragment may
  use other fragments' markers (nested at most 4 deep);
- markers in `//` comment lines are left alone.
Both arguments are written in our own files, never taken from a request: the result is as
static as the rest. No statement is assembled from pieces at run time: a statement that must
serve many shapes of request (search) takes the shape as parameters.

The files ship inside the package (`vaultgraph.cypher`, mapped from the repository's `cypher/`
in pyproject.toml) and are read with importlib.resources, so a wheel installed anywhere finds
them; `VAULTGRAPH_CYPHER_DIR` may point at another directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from neo4j import Query

PACKAGE = "vaultgraph.cypher"


def _walk(root: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    for entry in root.iterdir():
        if entry.is_dir():
            yield from _walk(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(".cypher"):
            yield f"{prefix}{entry.name.removesuffix('.cypher')}", entry


class Catalog:
    def __init__(self, statements: dict[str, str]):
        self._statements = statements
        self._queries = {name: Query(text) for name, text in statements.items()}

    @classmethod
    def load(cls, directory: str | Path | Traversable | None = None) -> Catalog:
        """The packaged catalog, or the one under `directory`."""
        root = files(PACKAGE) if directory in (None, "") else (
            Path(directory) if isinstance(directory, str) else directory)
        texts = dict(sorted((name, entry.read_text(encoding="utf-8"))
                            for name, entry in _walk(root)))
        fragments = {name.removeprefix(FRAGMENTS): _code(text) for name, text in texts.items()
                     if name.startswith(FRAGMENTS)}
        statements = {name: expand(text, fragments) for name, text in texts.items()
                      if not name.startswith(FRAGMENTS)}
        if not statements:
            raise FileNotFoundError(f"no .cypher files under {root}")
        return cls(statements)

    def __getitem__(self, name: str) -> Query:
        try:
            return self._queries[name]
        except KeyError:
            raise KeyError(f"no Cypher statement named {name!r} in the catalog") from None

    def text(self, name: str) -> str:
        return self._statements[name]

    def names(self, area: str | None = None) -> list[str]:
        if area is None:
            return sorted(self._statements)
        return sorted(n for n in self._statements if n.startswith(area + "/"))

    def schema_statements(self) -> list[str]:
        """Schema files hold several `;`-separated idempotent statements each."""
        out: list[str] = []
        for name in self.names("schema"):
            text = "\n".join(
                ln for ln in self._statements[name].splitlines()
                if not ln.strip().startswith("//"))
            out.extend(stmt.strip() for stmt in text.split(";") if stmt.strip())
        return out


FRAGMENTS = "fragments/"
_MARKER = re.compile(r"@(\w+)\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)")


def _code(text: str) -> str:
    """A fragment without its comment lines, on one line."""
    return " ".join(ln.strip() for ln in text.splitlines()
                    if ln.strip() and not ln.strip().startswith("//"))


def expand(text: str, fragments: dict[str, str], depth: int = 0) -> str:
    """`text` with every `@fragment(node[, param])` marker outside comments replaced."""
    if depth > 4:
        raise ValueError("Cypher fragments nest too deeply")

    def replace(match: re.Match) -> str:
        name, node, param = match.group(1), match.group(2), match.group(3) or "prefixes"
        if name not in fragments:
            raise KeyError(f"no Cypher fragment named {name!r} (cypher/fragments/{name}.cypher)")
        body = fragments[name].replace("{node}", node).replace("{param}", param)
        return expand(body, fragments, depth + 1)

    return "\n".join(ln if ln.lstrip().startswith("//") else _MARKER.sub(replace, ln)
                     for ln in text.split("\n"))
