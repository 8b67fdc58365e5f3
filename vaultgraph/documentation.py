"""Where a page of the documentation is on this machine, for the pointers the command line
prints (help texts, one-line failures, warnings).

The project declares no documentation site, so the pages ship inside the package: `docs/` is
`vaultgraph.docs` in the wheel (pyproject.toml), and a pointer names the installed file. A
checkout run without an install has them in `docs/` at the top of the repository.
"""

from __future__ import annotations

from pathlib import Path

from .settings import PROJECT_ROOT

SHIPPED = Path(__file__).resolve().parent / "docs"
CHECKOUT = PROJECT_ROOT / "docs"


def page(name: str, section: str | None = None) -> str:
    """A pointer to the page `name` (`operations.md`), and to its section when given:
    `/…/vaultgraph/docs/operations.md, "Backup and restore"`."""
    folder = SHIPPED if (SHIPPED / name).is_file() else CHECKOUT
    where = str(folder / name)
    return f'{where}, "{section}"' if section else where
