"""The documentation builds as a site with `mkdocs build --strict` (mkdocs.yml): a link to a page
or an anchor that does not exist, or a page left out of the navigation, fails the build and so
this test. And the rules every document keeps: the README stays a short front door, no document
cites a commit or a document outside the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
# A commit hash: 7 to 40 hex digits holding both a letter and a digit (a card number or a
# count is digits only).
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
# Documents outside the repository: the rule they hold is stated instead.
OUTSIDE = re.compile(r"spec §|DESIGN §|§\s*\d|\.\./shared|/work/shared|shared/notes")


def test_the_site_builds_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "configuration.html").exists()


def test_the_readme_is_a_short_front_door():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_no_document_cites_a_commit_or_a_document_outside_the_repository():
    found = []
    for doc in DOCUMENTS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            found += [(doc.relative_to(ROOT), n, m.group(0)) for m in COMMIT.finditer(line)]
            found += [(doc.relative_to(ROOT), n, m.group(0)) for m in OUTSIDE.finditer(line)]
    assert found == []


def test_the_rules_catch_what_they_are_for():
    assert COMMIT.search("measured at 1657c57 and ed74291") is not None
    assert COMMIT.search("4242424242424242 and 1048576 bytes") is None
    assert OUTSIDE.search("as spec §4.4 says") is not None
    assert OUTSIDE.search("DESIGN §8") is not None
