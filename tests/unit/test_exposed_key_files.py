"""A key file (the key ring's, the PKCS#11 PIN's) whose mode lets group or others at it is
warned of, by name, mode and fix, never its content: at `serve`'s start as a log line; the
commands print it (tests/cli/test_key_file_modes.py)."""

from __future__ import annotations

import logging
import os

import orjson
import pytest

from vaultgraph.cli import serve as serve_command
from vaultgraph.crypto import KeyRing
from vaultgraph.keys.custody import exposed_key_files
from vaultgraph.settings import Settings


def key_file(path, mode: int, text: str | None = None):
    path.write_text((text or KeyRing.generate_spec()) + "\n")
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o444])
def test_a_key_file_open_to_group_or_others_is_named(tmp_path, mode):
    path = key_file(tmp_path / "kek", mode)
    assert exposed_key_files(Settings(kek_file=str(path))) == [("VAULTGRAPH_KEK_FILE", path, mode)]


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_key_file_only_its_owner_reaches_is_not(tmp_path, mode):
    assert exposed_key_files(Settings(kek_file=str(key_file(tmp_path / "kek", mode)))) == []


def test_the_default_key_file_counts_and_a_ring_from_the_environment_reads_none(tmp_path):
    key_file(tmp_path / "kek", 0o644)
    assert [s for s, _, _ in exposed_key_files(Settings(home=str(tmp_path)))] == [
        "VAULTGRAPH_KEK_FILE"]
    assert exposed_key_files(Settings(home=str(tmp_path), kek=KeyRing.generate_spec())) == []


def test_the_pin_file_counts_where_a_token_is_configured(tmp_path):
    pin = key_file(tmp_path / "pin", 0o644, "1234")
    token = {"pkcs11_module": "/lib/p11.so", "pkcs11_token_label": "vault",
             "pkcs11_pin_file": str(pin), "kek": KeyRing.generate_spec()}
    assert exposed_key_files(Settings(**token)) == [("VAULTGRAPH_PKCS11_PIN_FILE", pin, 0o644)]
    assert exposed_key_files(Settings(**{**token, "pkcs11_module": ""})) == []  # not read


def serve_log(monkeypatch, capsys, settings: Settings) -> list[dict]:
    monkeypatch.setattr("vaultgraph.server.run", lambda settings, banner: 0)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        assert serve_command.serve(settings, local=False) == 0
    finally:
        root.handlers[:], root.level = saved
    err = capsys.readouterr().err
    return [orjson.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_serve_warns_at_start_of_a_key_file_open_to_others(tmp_path, monkeypatch, capsys):
    spec = KeyRing.generate_spec()
    path = key_file(tmp_path / "kek", 0o644, spec)
    said = serve_log(monkeypatch, capsys, Settings(port=0, kek_file=str(path)))
    warned = [(e["logger"], e["msg"]) for e in said if e["level"] == "warning"]
    assert warned == [("vaultgraph.keys", f"VAULTGRAPH_KEK_FILE {path} is open to group or "
                       f"others (mode 0644): chmod 600 {path}")]
    assert spec.partition(":")[2] not in str(said)


def test_serve_says_nothing_of_a_0600_key_file(tmp_path, monkeypatch, capsys):
    path = key_file(tmp_path / "kek", 0o600)
    said = serve_log(monkeypatch, capsys, Settings(port=0, kek_file=str(path)))
    assert [e for e in said if e["level"] == "warning"] == []
