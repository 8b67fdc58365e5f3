"""docs/applications.md's permissions table lists every permission an application can hold
(`vaultgraph/auth/permissions.py`), and no other."""

from __future__ import annotations

import re
from pathlib import Path

from vaultgraph.auth.permissions import ALL_PERMISSIONS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "applications.md"


def test_every_permission_has_its_row():
    text = PAGE.read_text()
    table = text[text.index("| permission | lets an application |"):].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z]+:[a-z]+)` \|", table, re.M)
    assert len(rows) == len(set(rows))
    assert sorted(rows) == sorted(ALL_PERMISSIONS)
