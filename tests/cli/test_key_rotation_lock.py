"""`vaultgraph keys rotate` with the key file on a read-only mount (the Docker Compose secret of
docs/containers-and-downstream-tests.md), and the rotation lock, which is held in Neo4j rather
than beside the key file (docs/operations.md, "Command line")."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vaultgraph.crypto import KeyRing

from .conftest import VAULTGRAPH, Result

MOUNT_READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[tuple[Callable[..., Result], str]]:
    """A way to run the command with `directory` read-only to it, and the error a write there
    gets. As root (who writes through mode 0555) the command runs in a mount namespace of its
    own where the directory is a read-only bind mount, as a mounted secret is; otherwise the
    directory is made 0555 for the block."""

    def under(prefix: list[str]) -> Callable[..., Result]:
        def run(cli, env: dict[str, str], *args: str) -> Result:
            proc = subprocess.run([*prefix, VAULTGRAPH, *args], env={**cli.env, **env},
                                  cwd=cli.cwd, capture_output=True, text=True, timeout=120,
                                  check=False)
            return Result(proc.returncode, proc.stdout, proc.stderr)
        return run

    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield under([]), os.strerror(errno.EACCES)
        finally:
            directory.chmod(0o755)
        return
    prefix = [shutil.which("unshare") or "unshare", "--mount", "--propagation", "private",
              "sh", "-c", MOUNT_READ_ONLY, str(directory)]
    probe = subprocess.run([*prefix, "sh", "-c", f'! touch "{directory}/probe" 2>/dev/null'],
                           capture_output=True, text=True, timeout=60, check=False)
    if probe.returncode != 0:
        pytest.skip("running as root, so mode 0555 does not stop a write, and this machine "
                    f"cannot make a read-only bind mount in a mount namespace ({probe.stderr!r})")
    yield under(prefix), os.strerror(errno.EROFS)


def test_a_key_file_on_a_read_only_mount_is_rotated_as_documented(cli, tmp_path):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    kek = secrets / "vaultgraph_kek"
    k1 = KeyRing.generate_spec()
    kek.write_text(k1 + "\n")
    kek.chmod(0o600)
    env = {"VAULTGRAPH_KEK_FILE": str(kek)}
    made = [cli("tenants", "create", "--name", f"ro {n}", env=env) for n in (1, 2)]
    assert [r.status for r in made] == [0, 0], [r.stderr for r in made]
    ids = [arg for r in made for arg in ("--tenant", r.json()["tenant_id"])]
    # The documented procedure: a new version appended to the secret's source file, then the
    # rotation, which resumes (re-wraps under it) and so needs no write to the key file.
    kek.write_text(f"{k1},{KeyRing.generate_spec().replace('k1:', 'k2:', 1)}\n")
    before = kek.read_bytes()
    with read_only(secrets) as (run, refused):
        resumed = run(cli, env, "keys", "rotate", *ids)
        assert resumed.status == 0, resumed.stderr
        assert resumed.stderr.startswith("resuming: 2 tenant(s) still wrapped under an older "
                                         "key; re-wrapping under k2\n")
        assert resumed.json() == {"active_key_version": "k2", "rewrapped": 2,
                                  "already_current": 0, "failed": []}
        # Nothing behind now: a new version is due, and the read-only file cannot take it.
        again = run(cli, env, "keys", "rotate", *ids)
    assert (again.status, again.stdout, again.stderr) == (
        1, "", f"vaultgraph: cannot add a key-encryption key version to {kek} ({refused}; no "
               "key was added): where the key file is read-only (a mounted secret), append a "
               "new '<version>:<base64url key>' entry to the file it is mounted from, restart "
               "the replicas, then run vaultgraph keys rotate again: it re-wraps under the new "
               "version and writes nothing\n")
    assert kek.read_bytes() == before
    assert sorted(os.listdir(secrets)) == ["vaultgraph_kek"]  # no lock file, nothing left over
    for r in made:
        shown = cli("tenants", "show", r.json()["tenant_id"], env=env)
        assert shown.json()["kek_versions"] == ["k2"], shown.stderr


async def test_one_rotation_at_a_time_against_a_database(cli, settings, kek_file):
    from vaultgraph.repository.key_rotation import rotation_lock
    from vaultgraph.wiring import connect

    made = cli("tenants", "create", "--name", "locked")
    assert made.status == 0, made.stderr
    ring = kek_file.read_text()
    db = connect(settings)
    proc = None
    try:
        async with rotation_lock(db, lambda holders: pytest.fail("nobody held the lock")):
            proc = await asyncio.create_subprocess_exec(
                VAULTGRAPH, "keys", "rotate", "--tenant", made.json()["tenant_id"], env=cli.env,
                cwd=cli.cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            said = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert said == (f"waiting for another vaultgraph keys rotate ({socket.gethostname()} "
                            f"pid {os.getpid()}) to finish: one rotation at a time runs against "
                            "this database\n")
            await asyncio.sleep(1)
            # It waits, and has added no key meanwhile.
            assert proc.returncode is None and kek_file.read_text() == ring
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await db.close()
    assert proc.returncode == 0, err
    assert err.decode().startswith(f"added key-encryption key version k2 to {kek_file}\n")
