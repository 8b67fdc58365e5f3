"""`vaultgraph keys rotate`'s key file (docs/operations.md): one rotation at a time per key
file, and a new version read under that lock, so two rotations never add the same version (a
duplicate version makes the ring unreadable on the next start). No Neo4j: the file side only."""

from __future__ import annotations

import fcntl
import os

import pytest

from vaultgraph.cli import common, keys
from vaultgraph.crypto import KeyRing
from vaultgraph.settings import Settings


@pytest.fixture
def settings(tmp_path) -> Settings:
    (tmp_path / "kek").write_text(KeyRing.generate_spec() + "\n")
    return Settings(home=str(tmp_path))


def versions(settings: Settings) -> list[str]:
    return list(KeyRing.from_spec(settings.kek_path.read_text().strip()).versions)


def test_a_version_added_meanwhile_is_read_under_the_lock(settings):
    # Another rotation added k2 after this one started (it read k1 alone): the version this
    # one adds is read from the file under the lock, so it is k3, not a second k2.
    started_with = common.check_kek(settings)
    extra = KeyRing.generate_spec().replace("k1:", "k2:", 1)
    settings.kek_path.write_text(f"{settings.kek_path.read_text().strip()},{extra}\n")
    assert list(started_with.versions) == ["k1"]
    with keys.rotation_lock(settings):
        assert keys.add_kek_version(settings) == "k3"
    assert versions(settings) == ["k1", "k2", "k3"]
    assert KeyRing.from_spec(settings.kek_path.read_text().strip()).active == "k3"
    assert oct(settings.kek_path.stat().st_mode & 0o777) == "0o600"
    assert not settings.kek_path.with_name("kek.new").exists()


def test_the_rotation_lock_is_exclusive_while_held(settings):
    lock_path = settings.kek_path.with_name("kek.lock")
    with keys.rotation_lock(settings):
        fd = os.open(lock_path, os.O_WRONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(lock_path, os.O_WRONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the rotation ends
    finally:
        os.close(fd)
