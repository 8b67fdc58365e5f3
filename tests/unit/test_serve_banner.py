"""`vaultgraph serve`'s first line names what is there: the Neo4j Browser only when the local
launcher's Neo4j is in use (README "Two commands")."""

from __future__ import annotations

import logging
import sys

import pytest

from vaultgraph import server
from vaultgraph.cli import common
from vaultgraph.cli import serve as cli
from vaultgraph.crypto import KeyRing
from vaultgraph.settings import Settings


@pytest.fixture
def banner(monkeypatch, capsys):
    # The server prints the banner once start-up passed (tests/hardening: never before a
    # refusal); here, the text the command hands it.
    monkeypatch.setattr(server, "run", lambda settings, banner: print(banner, file=sys.stderr))
    root = logging.getLogger()
    saved = root.handlers[:], root.level

    def serve(**kw) -> str:
        assert cli.serve(Settings(port=0, kek=KeyRing.generate_spec()), **kw) is None
        return capsys.readouterr().err

    yield serve
    root.handlers[:], root.level = saved


def test_no_browser_without_the_local_neo4j(banner):
    assert banner(local=False) == "serving on http://127.0.0.1:0 (docs at /docs)\n"


def test_the_browser_with_the_local_neo4j(banner, monkeypatch):
    class Neo:
        def start(self):
            return False  # already running

    monkeypatch.setattr(common, "local_neo4j", lambda settings: Neo())
    monkeypatch.setattr(common, "ensure_dev_kek", lambda settings: None)
    monkeypatch.setattr(common, "local_settings", lambda settings, neo: settings)
    monkeypatch.setattr(cli, "bootstrap", lambda settings: None)
    assert banner(local=True) == ("serving on http://127.0.0.1:0 (docs at /docs, Neo4j Browser "
                                  "at http://127.0.0.1:7474/browser/)\n")
