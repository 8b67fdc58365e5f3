"""The pkcs11 provider against a real SoftHSM2 token: the key-encryption key is generated in the
token, sensitive and never extractable; tenant keys are wrapped and unwrapped by the token, and
each wrapped key names the KEK (provider and label) that wrapped it."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys

import pytest

from vaultgraph.crypto import CryptoError, KeyRing, TenantKeys, new_tenant_key_material
from vaultgraph.keys.custody import open_custody

from .conftest import MODULE, USER_PIN, key_label


@pytest.fixture
def custody(hsm_settings):
    opened = open_custody(hsm_settings)
    yield opened
    opened.close()


def test_an_absent_key_is_generated_in_the_token_once(hsm_settings, caplog):
    caplog.set_level(logging.WARNING, "vaultgraph.keys")
    first = open_custody(hsm_settings)
    first.close()
    again = open_custody(hsm_settings)
    again.close()
    said = [r for r in caplog.records if "generated the key-encryption key" in r.getMessage()]
    assert len(said) == 1
    assert (said[0].key, first.generated, again.generated) == (
        hsm_settings.pkcs11_key_label, [hsm_settings.pkcs11_key_label], [])


def test_the_key_is_sensitive_and_never_extractable(custody, softhsm, hsm_settings):
    label = hsm_settings.pkcs11_key_label
    listed = softhsm.key_attributes(label)  # another PKCS#11 client reads the attributes
    assert f'label:      {label}' in listed
    assert "Access:     sensitive, always sensitive, never extractable, local" in listed
    assert custody.token.key_facts(label) == {
        "label": label, "bits": 256, "sensitive": True, "extractable": False,
        "always_sensitive": True, "never_extractable": True}


def test_the_key_value_cannot_be_read_from_the_token(custody, hsm_settings):
    from pkcs11 import Attribute, KeyType, ObjectClass
    from pkcs11.exceptions import AttributeSensitive

    with custody.token.session() as session:
        key = session.get_key(object_class=ObjectClass.SECRET_KEY, key_type=KeyType.AES,
                              label=hsm_settings.pkcs11_key_label)
        with pytest.raises(AttributeSensitive):
            key[Attribute.VALUE]


def test_wrap_and_unwrap_inside_the_token(custody, hsm_settings):
    ring = custody.ring
    active = f"pkcs11:{hsm_settings.pkcs11_key_label}"
    assert (ring.active, ring.versions, ring.remote) == (active, (active,), True)
    key = os.urandom(32)
    blob = ring.wrap(key, tenant_id="t1", slot="dek:d1")
    assert blob.startswith(active + ".")
    assert ring.unwrap(blob, tenant_id="t1", slot="dek:d1") == key
    for tenant_id, slot in (("t2", "dek:d1"), ("t1", "hmac")):  # bound to tenant and slot
        with pytest.raises(CryptoError):
            ring.unwrap(blob, tenant_id=tenant_id, slot=slot)
    tampered = blob[:-2] + ("A" if blob[-2] != "A" else "B") + blob[-1]
    with pytest.raises(CryptoError):
        ring.unwrap(tampered, tenant_id="t1", slot="dek:d1")


def test_stored_material_names_the_token_key_and_opens(custody, hsm_settings):
    ring = custody.ring
    stored = new_tenant_key_material(ring, "tenant-a")
    name = f"pkcs11:{hsm_settings.pkcs11_key_label}."
    assert stored["wrapped_deks"].startswith("d1:" + name)
    assert stored["wrapped_hmac_key"].startswith(name)
    keys = TenantKeys.unwrap(ring, "tenant-a", stored)
    sealed = keys.encrypt_json({"n": 1}, token_id="x")
    again = TenantKeys.unwrap(ring, "tenant-a", stored)
    assert again.decrypt_json(sealed, token_id="x") == {"n": 1}


def test_a_key_label_the_token_lacks_unwraps_nothing(custody):
    stored = new_tenant_key_material(custody.ring, "tenant-b")
    missing = "pkcs11:" + key_label("never-made")
    renamed = {name: value.replace(custody.ring.active, missing) for name, value in stored.items()}
    with pytest.raises(CryptoError, match="not in the key ring"):
        TenantKeys.unwrap(custody.ring, "tenant-b", renamed)


def test_a_file_ring_and_the_token_read_each_other(hsm_settings):
    """The file provider with the token configured beside it (a move between providers): both
    kinds of blob open in one ring, and a rotation's target wraps under the token key."""
    settings = dataclasses.replace(hsm_settings, kek_provider="file",
                                   kek=KeyRing.generate_spec())
    both = open_custody(settings)
    try:
        assert both.ring.active == "k1"
        from_file = new_tenant_key_material(both.ring, "tenant-c")
        target = both.target("pkcs11:" + hsm_settings.pkcs11_key_label)
        from_token = new_tenant_key_material(target, "tenant-d")
        assert from_token["wrapped_hmac_key"].startswith(target.active + ".")
        assert both.generated == [hsm_settings.pkcs11_key_label]
        for tenant_id, stored in (("tenant-c", from_file), ("tenant-d", from_token)):
            assert TenantKeys.unwrap(both.ring, tenant_id, stored).dek_version == "d1"
            assert TenantKeys.unwrap(target, tenant_id, stored).dek_version == "d1"
    finally:
        both.close()


def test_the_audit_key_is_derived_in_the_token_and_stable(hsm_settings, custody):
    mac = custody.ring.audit_mac(b"event")
    again = open_custody(hsm_settings)
    try:
        assert again.ring.audit_mac(b"event") == mac
    finally:
        again.close()
    assert len(mac) == 64


def test_closing_one_pool_leaves_another_logged_in(hsm_settings):
    """Login is per process, not per session: a pool closing (a service stopping, the CLI's
    start-up check) must not log out another pool of the same token."""
    first = open_custody(hsm_settings)
    second = open_custody(hsm_settings)
    try:
        stored = new_tenant_key_material(second.ring, "tenant-e")
        first.close()
        assert TenantKeys.unwrap(second.ring, "tenant-e", stored).dek_version == "d1"
    finally:
        second.close()


def test_a_second_pool_with_a_wrong_pin_is_refused(hsm_settings, custody, tmp_path):
    from vaultgraph.keys.pkcs11 import TokenError

    pin = tmp_path / "pin"
    pin.write_text("00000000\n")
    with pytest.raises(TokenError) as raised:
        open_custody(dataclasses.replace(hsm_settings, pkcs11_pin_file=str(pin)))
    assert raised.value.cause == (f"the PIN for the PKCS#11 token "
                                  f"{hsm_settings.pkcs11_token_label!r} is refused "
                                  "(VAULTGRAPH_PKCS11_PIN_FILE)")


CONNECT = """
import faulthandler, logging, sys
from vaultgraph.keys import pkcs11
faulthandler.dump_traceback_later(60, exit=True)  # never hangs the suite
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
pkcs11.CONNECT_PAUSES = (0.5,) * 4  # the parent has half a second to put the token back
token = pkcs11.Pkcs11Token(*sys.argv[1:4], sessions=2)
try:
    token.connect()
    print("connected", flush=True)
except pkcs11.TokenError as exc:
    print(exc.cause, flush=True)
token.close()
"""


def _connecting(softhsm, pin: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CONNECT, MODULE, softhsm.label, pin],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_token_missing_at_the_first_attempt_is_found_at_a_later_one(softhsm):
    """SoftHSM2's file store skips a token, or fails a login, while another process (a second
    worker logging in) writes the token's file: connecting at start-up lists the tokens again
    after a pause, rather than refusing to start."""
    child = None
    try:
        with softhsm.away():
            child = _connecting(softhsm, USER_PIN)
            first = child.stderr.readline()  # the first attempt, with no token in the store
        out, err = child.communicate(timeout=60)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
    assert first == "INFO PKCS#11 token not ready; trying again\n", first + err
    assert (child.returncode, out) == (0, "connected\n"), err


def test_a_refused_pin_is_never_tried_again(softhsm):
    """Each refusal counts toward the token's lock-out: one attempt, no retry."""
    out, err = _connecting(softhsm, "00000000").communicate(timeout=60)
    assert out == f"the PIN for the PKCS#11 token {softhsm.label!r} is refused " \
                  "(VAULTGRAPH_PKCS11_PIN_FILE)\n", err
    assert "trying again" not in err
