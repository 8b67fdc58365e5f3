"""The key check against the stored tenant keys, as `serve` runs it before serving and every
command that wraps keys runs it before writing: a key ring lacking the key-encryption key of a
stored tenant, or a KEK that does not open the tenants stored under it, is refused with one
line naming KEK ids and tenant ids (never key material), and nothing is written.

Each test sees only its own tenants (`own_tenants_only`, through `kek_file`) and turns off
VAULTGRAPH_SHARED_DATABASE, as a production vault runs."""

from __future__ import annotations

import dataclasses

from vaultgraph.crypto import KeyRing
from vaultgraph.wiring import open_services

from . import conftest

STRICT = {"VAULTGRAPH_SHARED_DATABASE": "false"}
FILE_FIX = "configure the key ring the data was written with (VAULTGRAPH_KEK / VAULTGRAPH_KEK_FILE)"


def new_tenant(cli, name="acme") -> dict:
    return conftest.new_tenant(cli, name, env=STRICT)


def random_key() -> str:
    return KeyRing.generate_spec().partition(":")[2]


def serve(cli, **env: str):
    """`vaultgraph serve` with this ring; a refusal exits at once (a start that passes would
    serve until the timeout: the test fails either way)."""
    return cli("serve", env={**STRICT, "VAULTGRAPH_PORT": "0", "VAULTGRAPH_HOST": "127.0.0.1",
                             "VAULTGRAPH_WORKERS": "1", "VAULTGRAPH_LOG_LEVEL": "WARNING",
                             **env}, timeout=90)


def test_the_old_key_file_after_a_rotation_refuses_to_start(cli, kek_file):
    first = new_tenant(cli, "first")
    new_tenant(cli, "second")
    old = kek_file.read_text().strip()
    assert cli("keys", "rotate", "--tenant", first["tenant_id"], env=STRICT).status == 0

    # Mid-rotation the key file holds k1 and k2: a command that wraps keys runs (the check
    # passes), and the old ring alone is refused, naming the version it lacks.
    assert new_tenant(cli, "meanwhile")["tenant_id"]
    done = serve(cli, VAULTGRAPH_KEK=old)
    assert (done.status, done.stderr) == (1, (
        "vaultgraph: 2 tenants under k2 are wrapped by a key-encryption key the key ring (k1) "
        f"does not hold: {FILE_FIX}\n"))

    assert cli("keys", "rotate", env=STRICT).status == 0  # finished: no tenant under k1 now
    done = serve(cli, VAULTGRAPH_KEK=old)
    assert (done.status, done.stderr) == (1, (
        "vaultgraph: 3 tenants under k2 are wrapped by a key-encryption key the key ring (k1) "
        f"does not hold: {FILE_FIX}\n"))
    assert old.partition(":")[2] not in done.stderr


def test_a_command_with_a_wrong_ring_writes_nothing(cli, kek_file, tmp_path):
    tenant = new_tenant(cli)
    wrong = f"k1:{random_key()},k2:{random_key()}"
    refused = (f"vaultgraph: the key-encryption key k1 does not open the tenant keys stored in "
               f"Neo4j under it (tenant {tenant['tenant_id']}; 1 of 1 sampled): {FILE_FIX}\n")

    created = cli("tenants", "create", "--name", "wrongkek",
                  env={**STRICT, "VAULTGRAPH_KEK": wrong})
    assert (created.status, created.stdout, created.stderr) == (1, "", refused)

    wrong_file = tmp_path / "wrong-kek"
    wrong_file.write_text(f"k1:{random_key()}\n")
    wrong_file.chmod(0o600)
    rotated = cli("keys", "rotate", env={**STRICT, "VAULTGRAPH_KEK_FILE": str(wrong_file)})
    assert (rotated.status, rotated.stdout, rotated.stderr) == (1, "", refused)
    assert wrong_file.read_text().count(",") == 0  # no version added

    listed = cli("tenants", "list", env=STRICT)
    assert [t["id"] for t in listed.lines()] == [tenant["tenant_id"]]
    assert cli("tenants", "show", tenant["tenant_id"]).json()["kek_versions"] == ["k1"]


async def test_a_tenant_a_wrong_key_wrote_is_named_at_start(cli, kek_file, settings):
    """A tenant written (before this check) under a `k2` that is not the ring's: the restart
    names the version and the tenant."""
    tenant = new_tenant(cli)
    real = kek_file.read_text().strip()
    fake_k2 = f"k2:{random_key()}"
    async with open_services(dataclasses.replace(
            settings, kek=f"k1:{random_key()},{fake_k2}")) as services:
        stray = (await services.tenants.create("wrongkek")).tenant_id

    done = serve(cli)
    assert (done.status, done.stderr) == (1, (
        "vaultgraph: 1 tenant under k2 is wrapped by a key-encryption key the key ring (k1) "
        f"does not hold: {FILE_FIX}\n"))

    real_k2 = f"k2:{random_key()}"
    done = serve(cli, VAULTGRAPH_KEK=f"{real},{real_k2}")
    assert (done.status, done.stderr) == (1, (
        "vaultgraph: the key-encryption key k2 does not open the tenant keys stored in Neo4j "
        f"under it (tenant {stray}; 1 of 1 sampled): {FILE_FIX}\n"))
    assert tenant["tenant_id"] not in done.stderr
