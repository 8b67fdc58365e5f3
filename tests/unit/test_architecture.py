"""The layers hold (docs/architecture.md): import-linter's contracts in pyproject.toml pass, and
they name every layer, so a future shortcut (a handler running Cypher, a service importing
aiohttp) fails here and in `make lint`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout


def test_contracts_cover_every_layer_and_domain_module():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    assert layers[2:] == ["vaultgraph.api", "vaultgraph.wiring", "vaultgraph.services",
                          "vaultgraph.repository", "vaultgraph.catalog"]
    packages = {p.name for p in (ROOT / "vaultgraph").iterdir()
                if p.is_dir() and (p / "__init__.py").exists()}
    named = {m.split(".")[1] for c in config["contracts"]
             for m in c.get("layers", []) + c.get("source_modules", [])}
    assert packages - {"static"} <= named, packages - named


def test_the_middleware_chain_is_described_in_its_order():
    """`app.MIDDLEWARES` is the one list of the chain; docs/architecture.md names each, in order."""
    import re

    from vaultgraph.app import MIDDLEWARES

    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## The middleware chain", 1)[1].split("\n## ", 1)[0]
    described = re.findall(r"^\d+\. `(\w+)`", section, flags=re.MULTILINE)
    assert described == [m.__name__ for m in MIDDLEWARES]
