"""The key check after moving tenants into the token: started again without the token settings,
the service (and a command that wraps keys) refuses with one line naming the token key the ring
lacks, instead of serving 500s."""

from __future__ import annotations

import asyncio
import dataclasses

import orjson

from vaultgraph.crypto import KeyRing

from .conftest import vault_env, vaultgraph

TOKEN_FIX = ("configure the token (VAULTGRAPH_PKCS11_MODULE, VAULTGRAPH_PKCS11_TOKEN_LABEL, "
             "VAULTGRAPH_PKCS11_PIN_FILE) and key the data was written with")


async def test_tenants_in_the_token_refuse_a_start_without_it(hsm_settings, tmp_path):
    beside = dataclasses.replace(hsm_settings, kek_provider="file", kek=KeyRing.generate_spec(),
                                 shared_database=False)
    env = vault_env(beside, tmp_path)
    created = await asyncio.to_thread(vaultgraph, env, "tenants", "create", "--name", "moving")
    assert created.returncode == 0, created.stderr
    label = f"pkcs11:{hsm_settings.pkcs11_key_label}"
    moved = await asyncio.to_thread(vaultgraph, env, "keys", "rotate", "--to", label)
    assert moved.returncode == 0, moved.stderr
    assert orjson.loads(moved.stdout)["rewrapped"] == 1

    without = vault_env(dataclasses.replace(beside, pkcs11_module="", pkcs11_token_label="",
                                            pkcs11_pin_file=""), tmp_path)
    refused = (f"vaultgraph: 1 tenant under {label} is wrapped by a key-encryption key the key "
               f"ring (k1) does not hold: {TOKEN_FIX}\n")
    done = await asyncio.to_thread(vaultgraph, without, "serve", timeout=90)
    assert (done.returncode, done.stderr) == (1, refused)
    done = await asyncio.to_thread(vaultgraph, without, "tenants", "create", "--name", "more")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", refused)
