"""`vaultgraph keys rotate`'s key file (docs/operations.md): a new version is read from the file
when it is added (under the rotation lock, which tests/cli covers against Neo4j), so two rotations
never add the same version (a duplicate version makes the ring unreadable on the next start). No
Neo4j: the file side only."""

from __future__ import annotations

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


def test_a_version_added_meanwhile_is_read_when_adding(settings):
    # Another rotation added k2 after this one started (it read k1 alone): the version this
    # one adds is read from the file as it adds it, so it is k3, not a second k2.
    started_with = common.check_kek(settings)
    extra = KeyRing.generate_spec().replace("k1:", "k2:", 1)
    settings.kek_path.write_text(f"{settings.kek_path.read_text().strip()},{extra}\n")
    assert list(started_with.versions) == ["k1"]
    assert keys.add_kek_version(settings) == "k3"
    assert versions(settings) == ["k1", "k2", "k3"]
    assert KeyRing.from_spec(settings.kek_path.read_text().strip()).active == "k3"
    assert oct(settings.kek_path.stat().st_mode & 0o777) == "0o600"
    assert not settings.kek_path.with_name("kek.new").exists()


def test_rotations_that_share_a_key_file_each_add_a_version_of_their_own(settings):
    # Rotations of two databases share one key file, but not a rotation lock (each database
    # holds its own): the file is read and rewritten under a lock of its own, so none of the
    # versions they add at once is lost (a lost one leaves its tenants unreadable).
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(6) as pool:
        added = list(pool.map(lambda _: keys.add_kek_version(settings), range(6)))
    assert sorted(added, key=lambda v: int(v[1:])) == [f"k{n}" for n in range(2, 8)]
    assert versions(settings) == [f"k{n}" for n in range(1, 8)]
