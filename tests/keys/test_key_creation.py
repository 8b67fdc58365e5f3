"""Which commands may create a key in the token (docs/key-custody.md): `vaultgraph serve` at
start-up and `vaultgraph keys rotate` into the token. Every other command with a key label the
token lacks (a typo) stops with one line naming the label and the token, and creates nothing.
And the line for a missing python-pkcs11 names the setting that made the command need it."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import orjson

from vaultgraph.documentation import page

from .conftest import vault_env, vaultgraph


async def test_a_command_that_does_not_rotate_never_creates_a_token_key(
        settings, hsm_settings, softhsm, tmp_path):
    label = hsm_settings.pkcs11_key_label  # this test's own: absent from the token
    env = vault_env(hsm_settings, tmp_path)
    missing = (f"vaultgraph: no key labelled {label!r} in the PKCS#11 token {softhsm.label!r}: "
               "check VAULTGRAPH_PKCS11_KEY_LABEL; only vaultgraph serve (at start-up) and "
               f"vaultgraph keys rotate create a key in the token ({page('key-custody.md')})\n")
    for args in (("tenants", "list"), ("keys", "status"), ("tenants", "create", "--name", "x"),
                 ("audit", "verify"), ("keys", "rotate", "--to", "pkcs11:" + label + "-b")):
        done = await asyncio.to_thread(vaultgraph, env, *args)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", missing), args
    assert label not in await asyncio.to_thread(softhsm.key_attributes, label)

    # A rotation into the token creates it (a tenant made under the suite's file key first).
    beside = vault_env(dataclasses.replace(hsm_settings, kek_provider="file", kek=settings.kek),
                       tmp_path)
    made = await asyncio.to_thread(vaultgraph, beside, "tenants", "create", "--name", "moved")
    assert made.returncode == 0, made.stderr
    tenant_id = orjson.loads(made.stdout)["tenant_id"]
    rotated = await asyncio.to_thread(vaultgraph, {**env, "VAULTGRAPH_KEK": settings.kek},
                                      "keys", "rotate", "--tenant", tenant_id)
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stderr.startswith(
        f"generated the key-encryption key {label!r} inside the PKCS#11 token "
        f"{softhsm.label!r} (sensitive, never extractable)\n"), rotated.stderr
    assert orjson.loads(rotated.stdout)["active_key_version"] == f"pkcs11:{label}"
    assert label in await asyncio.to_thread(softhsm.key_attributes, label)


async def test_a_missing_python_pkcs11_is_named_by_the_setting_that_needs_it(
        settings, hsm_settings, tmp_path):
    # A python-pkcs11 that cannot be imported, ahead of the installed one on the path.
    blocked = tmp_path / "no-pkcs11"
    (blocked / "pkcs11").mkdir(parents=True)
    (blocked / "pkcs11" / "__init__.py").write_text('raise ImportError("not installed")\n')
    path = os.pathsep.join([str(blocked), *filter(None, [os.environ.get("PYTHONPATH")])])
    for provider, needed_by in (
            ("file", "VAULTGRAPH_PKCS11_MODULE (a token configured beside the key file, to "
                     "unwrap the tenants moved into it)"),
            ("pkcs11", "VAULTGRAPH_KEK_PROVIDER=pkcs11")):
        configured = dataclasses.replace(hsm_settings, kek_provider=provider, kek=settings.kek)
        env = {**vault_env(configured, tmp_path), "PYTHONPATH": path}
        done = await asyncio.to_thread(vaultgraph, env, "tenants", "list")
        assert (done.returncode, done.stdout, done.stderr) == (
            1, "", f"vaultgraph: {needed_by} needs python-pkcs11: install vaultgraph[pkcs11]\n")
