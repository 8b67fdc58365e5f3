"""vaultgraph.testing.service.ServiceProcess when things go wrong (no Neo4j needed): the log a
failed start points to is still there, and errors carry the CLI's one-line cause, never a
secret."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from vaultgraph.testing.service import ServiceError, ServiceProcess, cli_cause

PASSWORD = "neo4j-password-not-for-messages"


def kek() -> str:
    return "k1:" + base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
            "VAULTGRAPH_HOME": str(tmp_path / "home"),
            "VAULTGRAPH_NEO4J_URI": "neo4j://127.0.0.1:1",   # nothing answers there
            "VAULTGRAPH_NEO4J_PASSWORD": PASSWORD, "VAULTGRAPH_KEK": kek(), **extra}


def logged_path(message: str) -> Path:
    return Path(message.rsplit("see ", 1)[1])


def test_a_start_that_times_out_keeps_the_log_it_points_to(tmp_path):
    service = ServiceProcess(env(tmp_path), startup_timeout=3)
    with pytest.raises(ServiceError) as err:
        service.start()
    log = logged_path(str(err.value))
    try:
        assert str(err.value).startswith("vaultgraph serve not ready in 3s; see ")
        assert log.is_file()
        service.stop()                          # a later stop leaves it alone too
        assert log.is_file()
        assert service.pid is None
    finally:
        log.unlink(missing_ok=True)


def test_a_start_that_exits_keeps_the_log_and_says_why(tmp_path):
    bad = "k1:short-but-secret-looking"
    service = ServiceProcess(env(tmp_path, VAULTGRAPH_KEK=bad), startup_timeout=30)
    with pytest.raises(ServiceError) as err:
        service.start()
    message = str(err.value)
    log = logged_path(message)
    try:
        assert message.startswith("vaultgraph serve exited with 1: vaultgraph: the "
                                  "key-encryption key in VAULTGRAPH_KEK is malformed"), message
        assert log.is_file() and "malformed" in log.read_text()
        assert "short-but-secret-looking" not in message and PASSWORD not in message
    finally:
        log.unlink(missing_ok=True)


def test_create_tenant_failing_says_the_clis_cause_and_no_secret(tmp_path):
    bad = "k1:short-but-secret-looking"
    service = ServiceProcess(env(tmp_path, VAULTGRAPH_KEK=bad))
    with pytest.raises(ServiceError) as err:
        service.create_tenant("t")
    message = str(err.value)
    assert message.startswith("vaultgraph tenants create failed (1): vaultgraph: the "
                              "key-encryption key in VAULTGRAPH_KEK is malformed"), message
    assert "short-but-secret-looking" not in message and PASSWORD not in message


def test_the_cause_is_one_line_and_blanks_secrets():
    secrets_env = {"VAULTGRAPH_KEK": "k1:AAAAbbbbCCCCdddd,k2:EEEEffffGGGGhhhh",
                   "VAULTGRAPH_NEO4J_PASSWORD": "hunter2-hunter2"}
    stderr = ("[neo4j] noise\nTraceback-ish line\n"
              "vaultgraph: wrong password hunter2-hunter2 for key AAAAbbbbCCCCdddd and "
              "EEEEffffGGGGhhhh, key vg_abcDEF123_-x\n[neo4j] trailing noise\n")
    cause = cli_cause(stderr, secrets_env)
    assert cause == "vaultgraph: wrong password … for key … and …, key vg_…"
    assert cli_cause("", {}) == "no message"
    assert len(cli_cause("vaultgraph: " + "x" * 1000, {})) == 400
