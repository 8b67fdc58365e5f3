import base64
import hashlib
import hmac
import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from vaultgraph.crypto import (
    CryptoError,
    KeyRing,
    TenantKeyCache,
    TenantKeys,
    _b64d,
    needs_rewrap,
    new_tenant_key_material,
    rewrap,
    rotate_tenant_dek,
)

SECRET = b"4111 1111 1111 1111"


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.fixture
def ring() -> KeyRing:
    return KeyRing.from_spec(KeyRing.generate_spec())


@pytest.fixture
def stored(ring) -> dict[str, str]:
    return new_tenant_key_material(ring, "tenant-a")


@pytest.fixture
def keys(ring, stored) -> TenantKeys:
    return TenantKeys.unwrap(ring, "tenant-a", stored)


def flip(blob: str, index: int) -> str:
    prefix, _, body = blob.rpartition(".")
    raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw[index] ^= 0x01
    return f"{prefix}.{b64(bytes(raw))}"


def test_round_trip(keys):
    blob = keys.encrypt(SECRET, token_id="tok1")
    assert keys.decrypt(blob, token_id="tok1", field="data") == SECRET
    assert keys.decrypt(keys.encrypt(b"", token_id="tok1"), token_id="tok1", field="data") == b""
    value = {"b": [1, 2], "a": "x"}
    assert keys.decrypt_json(keys.encrypt_json(value, token_id="t", field="data"),
                             token_id="t", field="data") == value


def test_ciphertext_format(keys):
    blob = keys.encrypt(SECRET, token_id="tok1")
    fmt, version, body = blob.split(".")
    assert (fmt, version) == ("v1", "d1")
    assert "=" not in body
    assert len(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))) == 12 + len(SECRET) + 16


def test_nonce_is_fresh(keys):
    first = keys.encrypt(SECRET, token_id="tok1")
    second = keys.encrypt(SECRET, token_id="tok1")
    assert first != second
    assert first.split(".")[2][:16] != second.split(".")[2][:16]  # the nonce prefix differs


def test_token_id_is_bound(keys):
    blob = keys.encrypt(SECRET, token_id="tok1")
    with pytest.raises(CryptoError, match="ciphertext could not be authenticated"):
        keys.decrypt(blob, token_id="tok2", field="data")


def test_field_is_bound(keys):
    blob = keys.encrypt(SECRET, token_id="tok1", field="data")
    with pytest.raises(CryptoError):
        keys.decrypt(blob, token_id="tok1", field="mask")
    mask = keys.encrypt(b"**** 1111", token_id="tok1", field="mask")
    with pytest.raises(CryptoError):
        keys.decrypt(mask, token_id="tok1", field="data")


def test_swapped_ciphertexts_between_tokens_fail(keys):
    blob_a = keys.encrypt(b"value-a", token_id="tok-a")
    blob_b = keys.encrypt(b"value-b", token_id="tok-b")
    with pytest.raises(CryptoError):
        keys.decrypt(blob_b, token_id="tok-a", field="data")
    with pytest.raises(CryptoError):
        keys.decrypt(blob_a, token_id="tok-b", field="data")


@pytest.mark.parametrize("index", [0, 11, 12, -17, -1])  # nonce, ciphertext, tag
def test_tampered_byte_fails(keys, index):
    blob = keys.encrypt(SECRET, token_id="tok1")
    with pytest.raises(CryptoError):
        keys.decrypt(flip(blob, index), token_id="tok1", field="data")


@pytest.mark.parametrize("blob", [
    "", "v1", "v1.d1", "v2.d1.AAAA", "v1.d9.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "v1.d1.!!!!", "v1.d1.AAAA", "v1.d1.x.y", None, b"v1.d1.AAAA",
])
def test_malformed_blob_fails(keys, blob):
    with pytest.raises(CryptoError, match="ciphertext could not be authenticated"):
        keys.decrypt(blob, token_id="tok1", field="data")


@pytest.mark.parametrize("body", [
    "+/8",        # b"\xfb\xff" in the standard alphabet: not base64url
    "-_8=",       # padded: no padding is stored
    "-_=8", "-_ 8", "-_8\n", "-_é8", "-_8!",
])
def test_base64url_is_decoded_strictly(body):
    assert _b64d("-_8") == b"\xfb\xff"
    with pytest.raises(ValueError):
        _b64d(body)


def test_value_ciphertext_format_is_pinned():
    # Stored ciphertexts must open under every later version: the AAD is the length-prefixed
    # label, tenant id, token id, field and DEK version, built here from that rule alone.
    deks = {"d1": bytes(range(32)), "d2": bytes(32)}
    keys = TenantKeys("tenant-é", deks, "d1", bytes(32))

    def aad(*parts: str | bytes) -> bytes:
        raw = [p if isinstance(p, bytes) else p.encode() for p in parts]
        return b"".join(len(p).to_bytes(4, "big") + p for p in raw)

    for token_id, field, version in [("tok1", "data", "d1"), ("tök-2", "mask", "d2"),
                                     ("tok1", "data", "d2"), ("", "x" * 300, "d1")]:
        expected = aad(b"vaultgraph:value:v1", "tenant-é", token_id, field, version)
        nonce = os.urandom(12)
        sealed = AESGCM(deks[version]).encrypt(nonce, SECRET, expected)
        blob = f"v1.{version}.{b64(nonce + sealed)}"
        assert keys.decrypt(blob, token_id=token_id, field=field) == SECRET
        if version == keys.dek_version:  # what the keys seal opens under the same AAD
            body = keys.encrypt(SECRET, token_id=token_id, field=field).split(".")[2]
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            assert AESGCM(deks[version]).decrypt(raw[:12], raw[12:], expected) == SECRET


def test_other_tenants_keys_cannot_decrypt(ring, keys):
    other = TenantKeys.unwrap(ring, "tenant-b", new_tenant_key_material(ring, "tenant-b"))
    blob = keys.encrypt(SECRET, token_id="tok1")
    with pytest.raises(CryptoError):
        other.decrypt(blob, token_id="tok1", field="data")


def test_material_is_bound_to_tenant(ring, stored):
    with pytest.raises(CryptoError):
        TenantKeys.unwrap(ring, "tenant-b", stored)


def test_tampered_or_swapped_material_fails(ring, stored):
    dek_blob = stored["wrapped_deks"].partition(":")[2]
    swapped = {**stored, "wrapped_hmac_key": dek_blob}  # a DEK used as the HMAC key
    with pytest.raises(CryptoError):
        TenantKeys.unwrap(ring, "tenant-a", swapped)
    tampered = {**stored, "wrapped_hmac_key": flip(stored["wrapped_hmac_key"], 20)}
    with pytest.raises(CryptoError):
        TenantKeys.unwrap(ring, "tenant-a", tampered)
    with pytest.raises(CryptoError):
        TenantKeys.unwrap(ring, "tenant-a", {**stored, "dek_version": "d7"})
    with pytest.raises(CryptoError):
        TenantKeys.unwrap(ring, "tenant-a", {"dek_version": "d1"})


def test_unknown_kek_version_fails(stored):
    other_ring = KeyRing({"k2": os.urandom(32)}, "k2")
    with pytest.raises(CryptoError, match="not in the key ring"):
        TenantKeys.unwrap(other_ring, "tenant-a", stored)


def test_dek_rotation_keeps_old_ciphertexts_readable(ring, stored, keys):
    old_blob = keys.encrypt(SECRET, token_id="tok1")
    rotated = rotate_tenant_dek(ring, "tenant-a", stored)
    assert rotated["dek_version"] == "d2"
    new_keys = TenantKeys.unwrap(ring, "tenant-a", rotated)
    assert new_keys.decrypt(old_blob, token_id="tok1", field="data") == SECRET
    new_blob = new_keys.encrypt(SECRET, token_id="tok1")
    assert new_blob.startswith("v1.d2.")
    assert new_keys.decrypt(new_blob, token_id="tok1", field="data") == SECRET
    assert rotate_tenant_dek(ring, "tenant-a", rotated)["dek_version"] == "d3"
    # Fingerprints must survive DEK rotation: the HMAC key is not rotated.
    assert new_keys.fingerprint("x") == keys.fingerprint("x")


def test_kek_rotation_via_rewrap():
    k1, k2 = os.urandom(32), os.urandom(32)
    old_ring = KeyRing({"k1": k1}, "k1")
    stored = new_tenant_key_material(old_ring, "tenant-a")
    keys = TenantKeys.unwrap(old_ring, "tenant-a", stored)
    blob = keys.encrypt(SECRET, token_id="tok1")

    both = KeyRing.from_spec(f"k1:{b64(k1)},k2:{b64(k2)}")
    assert both.active == "k2"
    assert needs_rewrap(both, stored)
    # No downtime: material wrapped by k1 still unwraps while k2 is active.
    assert TenantKeys.unwrap(both, "tenant-a", stored).decrypt(
        blob, token_id="tok1", field="data") == SECRET

    rewrapped = rewrap(both, "tenant-a", stored)
    assert not needs_rewrap(both, rewrapped)
    assert rewrapped["dek_version"] == stored["dek_version"]
    assert rewrapped["wrapped_hmac_key"].startswith("k2.")
    assert all(e.split(":")[1].startswith("k2.") for e in rewrapped["wrapped_deks"].split(","))
    # Once every tenant is rewrapped, k1 can leave the ring.
    new_keys = TenantKeys.unwrap(KeyRing({"k2": k2}, "k2"), "tenant-a", rewrapped)
    assert new_keys.decrypt(blob, token_id="tok1", field="data") == SECRET
    assert new_keys.fingerprint("x") == keys.fingerprint("x")


def test_from_spec_last_entry_is_active():
    k1, k2 = os.urandom(32), os.urandom(32)
    ring = KeyRing.from_spec(f" k1:{b64(k1)} , k2:{b64(k2)}== ")
    assert ring.versions == ("k1", "k2")
    assert ring.active == "k2"
    assert b64(k1) not in repr(ring)


def test_generate_spec_is_one_fresh_key():
    spec = KeyRing.generate_spec()
    version, _, encoded = spec.partition(":")
    assert version == "k1"
    assert len(encoded) == 43 and "=" not in encoded
    assert KeyRing.from_spec(spec).active == "k1"
    assert KeyRing.generate_spec() != spec


KEY_TEXT = b64(b"S" * 32)


@pytest.mark.parametrize("spec", [
    "",
    "   ",
    KEY_TEXT,  # a bare key, version forgotten
    f"{KEY_TEXT}:{KEY_TEXT}",  # key pasted where the version goes
    f"k1:{KEY_TEXT}k",  # wrong length
    f"k1:{KEY_TEXT[:-4]}",  # too short
    f"k1:{KEY_TEXT[:-1]}+",  # not base64url
    f"k1:{KEY_TEXT},k1:{KEY_TEXT}",  # duplicate version
    f"k1:{KEY_TEXT},",  # empty entry
    f"k.1:{KEY_TEXT}",  # version with a separator in it
])
def test_from_spec_rejects_bad_specs_without_echoing(spec):
    with pytest.raises(ValueError) as info:
        KeyRing.from_spec(spec)
    message = str(info.value)
    assert KEY_TEXT not in message
    assert KEY_TEXT[:8] not in message
    assert info.value.__cause__ is None


def test_fingerprint_is_deterministic_per_tenant_and_differs_across_tenants(ring, keys):
    again = TenantKeys.unwrap(ring, "tenant-a", new_tenant_key_material(ring, "tenant-a"))
    assert keys.fingerprint("4111") == keys.fingerprint("4111")
    assert len(keys.fingerprint("4111")) == 43 and "=" not in keys.fingerprint("4111")
    assert keys.fingerprint("4111") != keys.fingerprint("4112")
    assert keys.fingerprint("4111") != again.fingerprint("4111")  # a different key, same id
    other = TenantKeys.unwrap(ring, "tenant-b", new_tenant_key_material(ring, "tenant-b"))
    assert keys.fingerprint("4111") != other.fingerprint("4111")


def test_fingerprint_format_is_pinned():
    # Fingerprints and index values are persisted and searched: the formula must never drift.
    key = bytes(range(32))
    keys = TenantKeys("t", {"d1": os.urandom(32)}, "d1", key)
    assert keys.fingerprint("4111") == b64(hmac.new(key, b"fp:4111", hashlib.sha256).digest())
    message = b"ix:" + b"\0\0\0\x05email" + b"\0\0\0\x03a@b"
    assert keys.index_value("email", "a@b") == b64(hmac.new(key, message, hashlib.sha256).digest())


def test_index_value_is_domain_separated(keys):
    assert keys.index_value("email", "a@b") == keys.index_value("email", "a@b")
    assert keys.index_value("email", "a@b") != keys.index_value("phone", "a@b")
    assert keys.index_value("email", "a@b") != keys.fingerprint("a@b")
    assert keys.index_value("a", "b:c") != keys.index_value("a:b", "c")


def test_errors_never_contain_plaintext(keys):
    blob = keys.encrypt(SECRET, token_id="tok1")
    with pytest.raises(CryptoError) as info:
        keys.decrypt(blob, token_id="tok2", field="data")
    assert SECRET.decode() not in str(info.value) and blob not in str(info.value)

    not_json = keys.encrypt(b"not json " + SECRET, token_id="tok1")
    with pytest.raises(CryptoError) as info:
        keys.decrypt_json(not_json, token_id="tok1", field="data")
    assert SECRET.decode() not in str(info.value) + repr(info.value)
    # The JSON error holds the document; it must not ride along as context.
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert "4111" not in repr(keys)


def test_cache_reuses_entries_and_sees_rotation(ring, stored):
    cache = TenantKeyCache(ring, max_size=2)
    first = cache.get("tenant-a", stored)
    assert cache.get("tenant-a", dict(stored)) is first
    rotated = cache.get("tenant-a", rotate_tenant_dek(ring, "tenant-a", stored))
    assert rotated is not first and rotated.dek_version == "d2"
    with pytest.raises(CryptoError):
        cache.get("tenant-b", stored)  # a cached entry is never served to another tenant
    cache.get("tenant-b", new_tenant_key_material(ring, "tenant-b"))
    assert len(cache) == 2
    assert cache.get("tenant-a", stored) is not first  # least recently used was evicted
