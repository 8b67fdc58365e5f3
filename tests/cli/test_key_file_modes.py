"""A command that reads the key ring warns, in one line on stderr, of a key file whose mode
lets group or others at it: its name, its mode and the fix, never its content, once however
often the command opens the ring. A 0600 file, or a command that reads no key, says nothing."""

from __future__ import annotations

import pytest


def warning(path, mode: str) -> str:
    return (f"vaultgraph: warning: VAULTGRAPH_KEK_FILE {path} is open to group or others "
            f"(mode {mode}): chmod 600 {path}\n")


@pytest.mark.parametrize("mode", [0o644, 0o640], ids=["0644", "0640"])
def test_a_key_file_open_to_others_is_warned_of(cli, kek_file, mode):
    kek_file.chmod(mode)
    result = cli("tenants", "list")
    assert (result.status, result.stderr) == (0, warning(kek_file, f"{mode:04o}"))
    assert kek_file.read_text().strip().partition(":")[2] not in result.stderr


def test_a_0600_key_file_is_used_without_a_word(cli, kek_file):
    assert (kek_file.stat().st_mode & 0o777) == 0o600
    result = cli("tenants", "list")
    assert (result.status, result.stderr) == (0, "")


def test_a_rotation_reads_the_ring_twice_and_warns_once(cli, kek_file):
    kek_file.chmod(0o644)
    result = cli("keys", "rotate")
    assert result.status == 0, result.stderr
    assert result.stderr.startswith(warning(kek_file, "0644") + "added key-encryption key")
    assert result.stderr.count("warning") == 1
    assert (kek_file.stat().st_mode & 0o777) == 0o600  # the rotated file is written 0600


def test_a_command_that_reads_no_key_says_nothing_of_it(cli, kek_file):
    kek_file.chmod(0o644)
    tenant = cli("tenants", "create", "--name", "modes").json()["tenant_id"]
    result = cli("applications", "list", "--tenant", tenant)
    assert (result.status, result.stderr) == (0, "")
