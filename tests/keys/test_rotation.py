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
