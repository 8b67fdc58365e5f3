"""Many callers at once over a pool of sessions: every seal and unseal from 32 threads over 8
sessions returns the exact key, in a process of its own so that a crash inside the PKCS#11
module (a heap corrupted by unsynchronised calls) fails the test with the signal named."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from .conftest import vault_env

CALLERS = 32
SESSIONS = 8
ROUNDS = 40


def test_32_callers_over_8_sessions_get_back_every_key(hsm_settings, tmp_path):
    env = vault_env(hsm_settings, tmp_path)
    env["VAULTGRAPH_PKCS11_SESSIONS"] = str(SESSIONS)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("hammer.py")), str(CALLERS), str(ROUNDS)],
        env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode < 0:
        raise AssertionError(
            f"{CALLERS} threads sealing and unsealing over {SESSIONS} PKCS#11 sessions killed "
            f"the process ({signal.Signals(-done.returncode).name}):\n{done.stderr[-3000:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {
        "round trips": CALLERS * ROUNDS, "different": 0, "sessions": SESSIONS}
