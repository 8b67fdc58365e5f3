"""`vaultgraph keys rotate --to` moves a running vault between providers and token keys online:
file -> pkcs11:<a> (interrupted, then resumed) -> pkcs11:<b> -> file, while the service reads
every tenant's token all along; `keys status` names the provider and each tenant's KEK."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import orjson

from vaultgraph.api.typedefs import services_key
from vaultgraph.app import create_app
from vaultgraph.crypto import KeyRing
from vaultgraph.keys.custody import open_custody

from .conftest import key_label, vault_env, vaultgraph


async def test_rotation_between_providers_under_load(aiohttp_client, hsm_settings, tmp_path):
    kek_file = tmp_path / "kek"
    fd = os.open(kek_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(KeyRing.generate_spec() + "\n")
    # The file provider, with the token configured beside it: what the service runs before
    # and during a move into the token.
    settings = dataclasses.replace(hsm_settings, kek_provider="file", kek_file=str(kek_file))
    client = await aiohttp_client(create_app(settings, schema_applied=True))
    made = []
    for n in range(6):
        tenant = await client.server.app[services_key].tenants.create(f"rotated {n}")
        resp = await client.post("/tokens", json={"type": "token", "data": {"n": n}},
                                 headers={"SVC-API-KEY": tenant.key})
        assert resp.status == 201, await resp.text()
        made.append((tenant.tenant_id, tenant.key, (await resp.json())["id"]))

    answers: list[tuple[int, bool]] = []
    stop = asyncio.Event()

    async def load():
        while not stop.is_set():
            for n, (_, key, token_id) in enumerate(made):
                resp = await client.get(f"/tokens/{token_id}", headers={"SVC-API-KEY": key})
                body = await resp.json()
                answers.append((resp.status, body.get("data") == {"n": n}))

    reading = asyncio.create_task(load())
    env = vault_env(settings, tmp_path)
    only = [arg for tenant_id, _, _ in made for arg in ("--tenant", tenant_id)]
    first, second = "pkcs11:" + key_label("a"), "pkcs11:" + key_label("b")

    async def rotate(to: str, tenants: list[str]) -> dict:
        done = await asyncio.to_thread(vaultgraph, env, "keys", "rotate", "--to", to, *tenants)
        assert done.returncode == 0, done.stderr
        assert "re-wrapped tenants" in done.stderr  # progress
        return {"stderr": done.stderr, **orjson.loads(done.stdout)}

    async def kek_versions() -> dict:
        done = await asyncio.to_thread(vaultgraph, env, "keys", "status", "--json")
        assert done.returncode == 0, done.stderr
        status = orjson.loads(done.stdout)
        ours = {tenant_id for tenant_id, _, _ in made}
        return {"provider": status["provider"], "active_kek": status["active_kek"],
                "tenants": sorted({tuple(t["kek_versions"]) for t in status["tenants"]
                                   if t["id"] in ours})}

    try:
        assert await kek_versions() == {"provider": "file", "active_kek": "k1",
                                        "tenants": [("k1",)]}
        # An interrupted move (two tenants), then resumed: those two are skipped.
        part = await rotate(first, only[:4])
        assert "generated the key-encryption key" in part["stderr"]
        assert (part["rewrapped"], part["already_current"], part["failed"]) == (2, 0, [])
        rest = await rotate(first, only)
        assert (rest["active_key_version"], rest["rewrapped"], rest["already_current"],
                rest["failed"]) == (first, 4, 2, [])
        assert (await kek_versions())["tenants"] == [(first,)]
        moved = await rotate(second, only)
        assert (moved["rewrapped"], moved["failed"]) == (6, [])
        assert (await kek_versions())["tenants"] == [(second,)]
        back = await rotate("file", only)
        assert (back["active_key_version"], back["rewrapped"], back["failed"]) == ("k1", 6, [])
        assert (await kek_versions())["tenants"] == [("k1",)]
        await asyncio.sleep(0)  # at least one more round of reads after the last move
        count = len(answers)
        for _ in range(400):
            if len(answers) >= count + len(made):
                break
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await reading
    assert answers and set(answers) == {(200, True)}


async def test_status_names_the_token_key(hsm_settings, tmp_path):
    # The key as the service's start-up creates it (`keys status` never does).
    await asyncio.to_thread(lambda: open_custody(hsm_settings).close())
    env = vault_env(hsm_settings, tmp_path)
    done = await asyncio.to_thread(vaultgraph, env, "keys", "status", "--json")
    assert done.returncode == 0, done.stderr
    status = orjson.loads(done.stdout)
    label = hsm_settings.pkcs11_key_label
    assert (status["provider"], status["active_kek"], status["token"], status["active_key"]) == (
        "pkcs11", f"pkcs11:{label}", hsm_settings.pkcs11_token_label,
        {"label": label, "bits": 256, "sensitive": True, "extractable": False,
         "always_sensitive": True, "never_extractable": True})
    text = await asyncio.to_thread(vaultgraph, env, "keys", "status")
    assert text.stdout.splitlines()[:3] == [
        "provider     pkcs11", f"active KEK   pkcs11:{label}",
        f"token key    {label} in {hsm_settings.pkcs11_token_label}: AES-256, sensitive, "
        "never extractable"]


def created(env: dict[str, str], name: str) -> str:
    done = vaultgraph(env, "tenants", "create", "--name", name)
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)["tenant_id"]


def kek_versions_of(env: dict[str, str], *tenant_ids: str) -> list[list[str]]:
    done = vaultgraph(env, "keys", "status", "--json")
    assert done.returncode == 0, done.stderr
    found = {t["id"]: t["kek_versions"] for t in orjson.loads(done.stdout)["tenants"]}
    return [found[tenant_id] for tenant_id in tenant_ids]


async def test_a_rotation_of_the_key_file_leaves_tenants_in_the_token(hsm_settings, tmp_path):
    # The file provider with the token configured beside it, one tenant moved into the token:
    # `keys rotate` (no --to) rotates the key file's tenants and never moves that one out.
    kek_file = tmp_path / "kek"
    kek_file.write_text(KeyRing.generate_spec() + "\n")
    kek_file.chmod(0o600)
    settings = dataclasses.replace(hsm_settings, kek_provider="file", kek_file=str(kek_file))
    env = vault_env(settings, tmp_path)
    in_token, in_file = created(env, "in the token"), created(env, "in the key file")
    token_key = "pkcs11:" + key_label("hsm")
    moved = await asyncio.to_thread(vaultgraph, env, "keys", "rotate", "--to", token_key,
                                    "--tenant", in_token)
    assert moved.returncode == 0, moved.stderr
    both = ["--tenant", in_token, "--tenant", in_file]

    done = await asyncio.to_thread(vaultgraph, env, "keys", "rotate", *both)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(
        "leaving 1 tenant(s) under a PKCS#11 token key where they are (a rotation of the key "
        "file moves none out of the token; --to file does)\n"
        f"added key-encryption key version k2 to {kek_file}\n"), done.stderr
    assert orjson.loads(done.stdout) == {"active_key_version": "k2", "rewrapped": 1,
                                         "already_current": 0, "failed": []}
    assert kek_versions_of(env, in_token, in_file) == [[token_key], ["k2"]]

    # Resuming (a tenant of the file behind) moves none out of the token either.
    behind = created(env, "behind")  # under k2, the newest: a version added meanwhile
    kek_file.write_text(kek_file.read_text().strip() + ","
                        + KeyRing.generate_spec().replace("k1:", "k3:", 1) + "\n")
    resumed = await asyncio.to_thread(vaultgraph, env, "keys", "rotate", *both,
                                      "--tenant", behind)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming: 2 tenant(s) still wrapped under an older key; re-wrapping under k3\n" \
        in resumed.stderr
    assert kek_versions_of(env, in_token, in_file, behind) == [[token_key], ["k3"], ["k3"]]

    # Only tenants in the token: a version would wrap nothing, so none is added.
    none = await asyncio.to_thread(vaultgraph, env, "keys", "rotate", "--tenant", in_token)
    assert none.returncode == 0, none.stderr
    assert "no tenant of the rotation is under the key file: no key-encryption key version was " \
        "added\n" in none.stderr
    assert "k4:" not in kek_file.read_text()
    assert kek_versions_of(env, in_token) == [[token_key]]

    # Only --to file moves it out of the token.
    out = await asyncio.to_thread(vaultgraph, env, "keys", "rotate", "--to", "file", *both)
    assert out.returncode == 0, out.stderr
    assert kek_versions_of(env, in_token) == [["k3"]]
