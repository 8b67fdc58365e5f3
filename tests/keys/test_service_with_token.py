"""The service with its key-encryption key in a SoftHSM2 token: it restarts and reads what it
wrote, opens many cold tenants at once, answers 503 while the token is gone and recovers
without a restart, and refuses to start (one line) with the wrong token, PIN or key."""

from __future__ import annotations

import asyncio
import dataclasses

from vaultgraph.api.typedefs import services_key
from vaultgraph.app import create_app
from vaultgraph.documentation import page
from vaultgraph.keys.custody import open_custody

from .conftest import MODULE, key_label, vault_env, vaultgraph

CARD = {"type": "card", "data": {"number": "4242424242424242"}}


async def _tenant_with_token(client, data: dict) -> tuple[str, str]:
    """A new tenant and one token of it: (its administrator key, the token id)."""
    created = await client.server.app[services_key].tenants.create("hsm")
    resp = await client.post("/tokens", json={"type": "token", "data": data},
                             headers={"SVC-API-KEY": created.key})
    assert resp.status == 201, await resp.text()
    return created.key, (await resp.json())["id"]


async def _read(client, key: str, token_id: str):
    resp = await client.get(f"/tokens/{token_id}", headers={"SVC-API-KEY": key})
    return resp.status, (await resp.json()), resp.headers


async def test_a_restarted_service_reads_what_it_wrote(aiohttp_client, hsm_settings):
    first = await aiohttp_client(create_app(hsm_settings, schema_applied=True))
    key, token_id = await _tenant_with_token(first, {"secret": "kept"})
    await first.close()
    second = await aiohttp_client(create_app(hsm_settings, schema_applied=True))
    status, body, _ = await _read(second, key, token_id)
    assert (status, body["data"]) == (200, {"secret": "kept"})


async def test_fifty_cold_tenants_read_at_once(aiohttp_client, hsm_settings):
    writer = await aiohttp_client(create_app(hsm_settings, schema_applied=True))
    made = [await _tenant_with_token(writer, {"n": n}) for n in range(50)]
    await writer.close()
    # 50 first authentications from one address at once: above the failed-authentication
    # budget, which counts a lookup in flight as a possible failure.
    reader = await aiohttp_client(create_app(
        dataclasses.replace(hsm_settings, auth_failure_limit=100), schema_applied=True))
    answers = await asyncio.gather(*(_read(reader, key, token_id) for key, token_id in made))
    assert [(status, body.get("data")) for status, body, _ in answers] == [
        (200, {"n": n}) for n in range(50)]


async def test_a_lost_token_is_a_503_and_the_service_recovers(aiohttp_client, hsm_settings,
                                                              softhsm):
    writer = await aiohttp_client(create_app(hsm_settings, schema_applied=True))
    cold = await _tenant_with_token(writer, {"cold": True})
    await writer.close()
    client = await aiohttp_client(create_app(hsm_settings, schema_applied=True))
    warm = await _tenant_with_token(client, {"warm": True})
    with softhsm.away():
        status, body, headers = await _read(client, *cold)
        assert (status, body["status"], headers["Retry-After"]) == (503, 503, "2")
        assert body["detail"] == "The key store is unavailable; try again shortly."
        # A tenant whose keys are unwrapped already keeps working without the token.
        status, body, _ = await _read(client, *warm)
        assert (status, body["data"]) == (200, {"warm": True})
    for _ in range(200):  # back: the next request after a pause reconnects (no restart)
        status, body, _ = await _read(client, *cold)
        if status != 503:
            break
        await asyncio.sleep(0.05)
    assert (status, body["data"]) == (200, {"cold": True})


async def test_a_wrong_key_under_the_label_refuses_to_start(hsm_settings, tmp_path):
    from pkcs11 import KeyType, ObjectClass

    from vaultgraph.wiring import open_services

    async with open_services(hsm_settings) as services:
        tenant_id = (await services.tenants.create("written under the right key")).tenant_id
    custody = open_custody(hsm_settings)  # the label now names another key
    try:
        with custody.token.session() as session:
            session.get_key(object_class=ObjectClass.SECRET_KEY, key_type=KeyType.AES,
                            label=hsm_settings.pkcs11_key_label).destroy()
        assert custody.token.ensure_key(hsm_settings.pkcs11_key_label)
    finally:
        custody.close()
    done = await asyncio.to_thread(vaultgraph, vault_env(hsm_settings, tmp_path), "serve")
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"vaultgraph: the key-encryption key pkcs11:{hsm_settings.pkcs11_key_label} in the "
        f"PKCS#11 token does not open the tenant keys stored in Neo4j under it (tenant "
        f"{tenant_id}; 1 of 1 sampled): configure the token (VAULTGRAPH_PKCS11_MODULE, "
        "VAULTGRAPH_PKCS11_TOKEN_LABEL, VAULTGRAPH_PKCS11_PIN_FILE) and key the data was "
        "written with")


FIX = ("check VAULTGRAPH_PKCS11_MODULE, VAULTGRAPH_PKCS11_TOKEN_LABEL, "
       f"VAULTGRAPH_PKCS11_PIN_FILE and VAULTGRAPH_PKCS11_KEY_LABEL ({page('key-custody.md')})")


async def test_a_wrong_pin_token_or_module_is_one_line(hsm_settings, softhsm, tmp_path):
    wrong_pin = tmp_path / "wrong-pin"
    wrong_pin.write_text("99999999\n")
    wrong_pin.chmod(0o600)  # only the refusal is said: a PIN file open to others adds a warning
    cases = [
        ({"pkcs11_pin_file": str(wrong_pin)},
         f"the PIN for the PKCS#11 token {softhsm.label!r} is refused "
         "(VAULTGRAPH_PKCS11_PIN_FILE)"),
        ({"pkcs11_token_label": "no-such-token"},
         f"no PKCS#11 token labelled 'no-such-token' in {MODULE}"),
        ({"pkcs11_module": str(tmp_path / "missing.so")},
         f"cannot load the PKCS#11 module {tmp_path / 'missing.so'} (no such file)"),
        ({"pkcs11_pin_file": str(tmp_path / "absent")},
         f"cannot read VAULTGRAPH_PKCS11_PIN_FILE {tmp_path / 'absent'} (No such file or "
         "directory)"),
    ]
    for change, cause in cases:
        env = vault_env(dataclasses.replace(hsm_settings, **change), tmp_path)
        done = await asyncio.to_thread(vaultgraph, env, "serve")
        assert (done.returncode, done.stderr) == (1, f"vaultgraph: {cause}: {FIX}\n"), change
        assert "99999999" not in done.stderr


async def test_a_token_key_that_can_leave_the_token_is_refused(hsm_settings, softhsm):
    from pkcs11 import Attribute, KeyType

    label = key_label("extractable")
    custody = open_custody(hsm_settings)
    try:
        with custody.token.session() as session:
            session.generate_key(KeyType.AES, 256, label=label, store=True, template={
                Attribute.SENSITIVE: False, Attribute.EXTRACTABLE: True})
    finally:
        custody.close()
    done = await asyncio.to_thread(
        vaultgraph, vault_env(dataclasses.replace(hsm_settings, pkcs11_key_label=label),
                              softhsm.tokens.parent), "keys", "status")
    assert (done.returncode, done.stderr) == (1, (
        f"vaultgraph: the key {label!r} in the PKCS#11 token {softhsm.label!r} is not a "
        f"sensitive, non-extractable AES-256 key; refusing it as a key-encryption key: {FIX}\n"))
