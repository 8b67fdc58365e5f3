"""Key custody settings: the provider is `file` unless told, a wrong provider or key label is one
line, and the file provider says at start-up that it is for development."""

from __future__ import annotations

import logging

import orjson
import pytest

from vaultgraph.cli import serve as serve_command
from vaultgraph.crypto import KeyRing
from vaultgraph.keys.custody import DEVELOPMENT_ONLY, open_custody
from vaultgraph.settings import ConfigError, Settings


def test_the_file_provider_is_the_default():
    settings = Settings.from_env({})
    assert (settings.kek_provider, settings.pkcs11_key_label, settings.pkcs11_sessions) == (
        "file", "vaultgraph-kek", 4)


@pytest.mark.parametrize(("env", "cause"), [
    ({"VAULTGRAPH_KEK_PROVIDER": "kms"}, "VAULTGRAPH_KEK_PROVIDER is 'kms'"),
    ({"VAULTGRAPH_PKCS11_KEY_LABEL": "a.b"}, "VAULTGRAPH_PKCS11_KEY_LABEL is 'a.b'"),
    ({"VAULTGRAPH_PKCS11_SESSIONS": "0"}, "VAULTGRAPH_PKCS11_SESSIONS is 0"),
])
def test_a_wrong_custody_setting_is_named(env, cause):
    with pytest.raises(ConfigError) as raised:
        Settings.from_env(env)
    assert raised.value.cause == cause


def test_the_file_ring_is_local_and_wraps_as_before():
    custody = open_custody(Settings(kek=KeyRing.generate_spec()))
    assert (custody.provider, custody.token, custody.ring.active, custody.ring.remote) == (
        "file", None, "k1", False)
    assert custody.ring.wrap(b"k" * 32, tenant_id="t", slot="hmac").startswith("k1.")


def test_serve_with_the_file_provider_says_it_is_for_development(monkeypatch, capsys):
    monkeypatch.setattr("vaultgraph.server.run", lambda settings, banner: 0)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        assert serve_command.serve(Settings(port=0, kek=KeyRing.generate_spec()),
                                   local=False) == 0
    finally:
        root.handlers[:], root.level = saved
    said = [orjson.loads(line) for line in capsys.readouterr().err.splitlines()
            if line.startswith("{")]
    assert [(e["logger"], e["level"], e["msg"]) for e in said] == [
        ("vaultgraph.keys", "info", DEVELOPMENT_ONLY)]


def test_the_pkcs11_provider_needs_its_module_and_token():
    with pytest.raises(ConfigError) as raised:
        open_custody(Settings(kek_provider="pkcs11"))
    assert raised.value.cause == ("VAULTGRAPH_PKCS11_MODULE and VAULTGRAPH_PKCS11_TOKEN_LABEL "
                                  "not set (the PKCS#11 provider needs the token's library and "
                                  "label)")
