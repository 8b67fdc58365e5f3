"""A PIN file whose mode lets group or others read it is warned of in one line (its name, its
mode and the fix, never the PIN) by a command that opens the token; a 0600 one is not."""

from __future__ import annotations

import asyncio
import dataclasses
import os

from vaultgraph.keys.custody import open_custody

from .conftest import USER_PIN, vault_env, vaultgraph


async def test_a_pin_file_open_to_others_is_warned_of(hsm_settings, softhsm, tmp_path):
    open_custody(hsm_settings).close()  # this test's key, generated in the token
    pin = tmp_path / "pin"
    pin.write_text(USER_PIN + "\n")
    said = []
    for mode in (0o644, 0o600):
        os.chmod(pin, mode)
        env = vault_env(dataclasses.replace(hsm_settings, pkcs11_pin_file=str(pin)), tmp_path)
        done = await asyncio.to_thread(vaultgraph, env, "keys", "status", "--json")
        assert done.returncode == 0, done.stderr
        said.append(done.stderr)
    assert said == [f"vaultgraph: warning: VAULTGRAPH_PKCS11_PIN_FILE {pin} is open to group or "
                    f"others (mode 0644): chmod 600 {pin}\n", ""]
    assert USER_PIN not in said[0]
