"""The Cypher catalog: every statement is a file `cypher/<area>/<name>.cypher`, loaded once.

Code asks for a statement by name (`catalog["tokens/create"]`); an unknown name fails at once.
Values always travel as `$parameters`; nothing here builds query text from input.

The files ship inside the package (`vaultgraph.cypher`, mapped from the repository's `cypher/`
in pyproject.toml) and are read with importlib.resources, so a wheel installed anywhere finds
them; `VAULTGRAPH_CYPHER_DIR` may point at another directory.
"""

from __future__ import annotations

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
        statements = dict(sorted((name, entry.read_text(encoding="utf-8"))
                                 for name, entry in _walk(root)))
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
