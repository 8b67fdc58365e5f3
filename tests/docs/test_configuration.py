"""docs/configuration.md lists every setting `vaultgraph/settings.py` reads, each with its true
default, and nothing else: a setting added, renamed or removed without its row fails here."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from vaultgraph.settings import PREFIX, Settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
_ROW = re.compile(r"^\| `(VAULTGRAPH_[A-Z0-9_]+)` \| (.*?) \|", re.M)
_NUMBER = re.compile(r"^`(-?\d+(?:\.\d+)?)`$")
_WORD = re.compile(r"^`([^`$ ]+)`$")


def rows() -> dict[str, str]:
    found: dict[str, str] = {}
    for name, default in _ROW.findall(PAGE.read_text()):
        assert name not in found, f"{name} has two rows"
        found[name] = default.strip()
    return found


def test_every_setting_has_a_row_and_every_row_is_a_setting():
    documented = set(rows())
    read = {PREFIX + f.name.upper() for f in fields(Settings)}
    assert sorted(read - documented) == [], "settings missing from docs/configuration.md"
    assert sorted(documented - read) == [], "rows in docs/configuration.md no setting reads"


def test_each_plain_default_is_the_setting_s_default():
    documented = rows()
    checked = 0
    for f in fields(Settings):
        cell = documented[PREFIX + f.name.upper()]
        if isinstance(f.default, bool):
            continue
        if isinstance(f.default, int | float) and (number := _NUMBER.match(cell)):
            assert float(number.group(1)) == float(f.default), (f.name, cell, f.default)
            checked += 1
        elif isinstance(f.default, str) and f.default and (word := _WORD.match(cell)):
            assert word.group(1) == f.default, (f.name, cell, f.default)
            checked += 1
    assert checked >= 40  # the plain cells really are compared
