"""Encryption core: key ring, per-tenant keys, value encryption and keyed fingerprints.

Key hierarchy (docs/security.md, "Keys"): KEKs (``KeyRing``) wrap each tenant's random
data-encryption keys (DEKs, AES-256-GCM) and fingerprint key (HMAC-SHA256); DEKs encrypt values.
A KEK comes from a provider (docs/key-custody.md): ``file`` (key bytes in a 0600 file or an
environment variable) or ``pkcs11`` (a non-extractable key inside a token, which seals and opens
tenant keys itself: vaultgraph/keys/pkcs11.py).

Stored tenant key material -- string properties on the tenant node, never raw keys:

    dek_version       active DEK version for new encryptions, e.g. "d2"
    wrapped_deks      "d1:k1.<b64>,d2:k2.<b64>"   (DEK version ":" wrapped blob, comma-separated)
    wrapped_hmac_key  "k1.<b64>"

A wrapped blob is ``<kek id>.<base64url(nonce || ciphertext || tag)>`` (no padding), AES-256-GCM
under that KEK with AAD binding tenant id, KEK id and slot ("dek:d1" / "hmac"). The KEK id names
the provider and key: a file KEK by its version ("k1", as ever), a token KEK as
``pkcs11:<key label>`` ("d1:pkcs11:kek-2026.<b64>" in ``wrapped_deks``),
so blobs cannot move between tenants or slots. Each blob names its own KEK: after a new KEK is
appended to the ring old blobs still unwrap, and ``rewrap`` migrates tenants one at a time.

Value ciphertexts are ``v1.<dek version>.<base64url(nonce || ciphertext || tag)>`` with AAD
binding tenant id, token id, field label ("data", "mask", ...) and DEK version.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    orjson = None  # type: ignore[assignment]

__all__ = [
    "CryptoError", "FileKek", "Kek", "KeyRing", "TenantKeyCache", "TenantKeys", "needs_rewrap",
    "new_tenant_key_material", "parse_spec", "rewrap", "rotate_tenant_dek",
]

KEY_BYTES = 32
NONCE_BYTES = 12  # 96-bit GCM nonce, random per encryption
_TAG_BYTES = 16
# Versions appear inside the stored formats, so they must not contain "." "," or ":".
_VERSION_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")
# A KEK's id as blobs name it: a file version, or "pkcs11:<key label>" for a key in a token.
_KEK_ID_RE = re.compile(r"(?:pkcs11:)?[A-Za-z0-9_-]{1,32}")
# base64url to the standard alphabet for binascii's strict decoder; "+", "/" and "=" (outside
# the urlsafe alphabet, and no padding is stored) become a byte it refuses.
_FROM_URLSAFE = bytes.maketrans(b"-_+/=", b"+/!!!")
_WRAP_LABEL = b"vaultgraph:tenant-key"
_AUDIT_LABEL = b"vaultgraph:audit-mac:v1"
_VALUE_LABEL = b"vaultgraph:value:v1"
_AAD_TAILS_KEPT = 64  # (field, version) pairs: a tenant has a few of each
_STORED_FIELDS = ("dek_version", "wrapped_deks", "wrapped_hmac_key")
_UNWRAP_FAILED = "tenant key material could not be unwrapped"


class CryptoError(Exception):
    """Authentication or unwrap failure. Messages are fixed: never plaintext or key bytes."""


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    """Strict base64url without padding: urlsafe_b64decode alone silently drops characters
    outside the alphabet; binascii's strict mode refuses them (a ValueError, as a character
    outside ASCII is). Every value a page shows is decoded here: no regular expression."""
    if len(text) % 4 == 1:
        raise ValueError("not base64url")
    padded = text.encode("ascii").translate(_FROM_URLSAFE) + b"=" * (-len(text) % 4)
    return binascii.a2b_base64(padded, strict_mode=True)


def _aad(*parts: str | bytes) -> bytes:
    # Length-prefix every part so ("ab", "c") and ("a", "bc") can never produce the same AAD.
    out = bytearray()
    for part in parts:
        raw = part.encode("utf-8") if isinstance(part, str) else part
        out += len(raw).to_bytes(4, "big") + raw
    return bytes(out)


def _seal(aead: AESGCM, plaintext: bytes, aad: bytes) -> str:
    nonce = os.urandom(NONCE_BYTES)
    return _b64e(nonce + aead.encrypt(nonce, plaintext, aad))


def _open(aead: AESGCM, sealed: str, aad: bytes) -> bytes:
    raw = _b64d(sealed)
    if len(raw) < NONCE_BYTES + _TAG_BYTES:
        raise ValueError("too short")
    return aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], aad)


class Kek:
    """One key-encryption key: seals and opens tenant keys with AES-256-GCM (``nonce ||
    ciphertext || tag``) and derives the audit trail's MAC key. `remote`: its operations block
    on a device (a PKCS#11 token), so callers on an event loop run them in `KeyRing.executor`.
    """

    id: str
    remote = False

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        raise NotImplementedError

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        """The plaintext; `CryptoError` when the blob does not authenticate under this key."""
        raise NotImplementedError

    def audit_key(self) -> bytes:
        raise NotImplementedError


class FileKek(Kek):
    """A KEK whose bytes the process holds (the ``file`` provider: a 0600 file or an
    environment variable). Only the AESGCM object and the derived audit key are kept."""

    def __init__(self, version: str, key: bytes) -> None:
        self.id = version
        self._aead = AESGCM(key)
        # The audit trail's MAC key, derived (never the KEK itself), so a KEK rotation keeps old
        # events verifiable while the old version stays in the ring.
        self._audit = hmac.new(key, _AUDIT_LABEL, hashlib.sha256).digest()

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        if len(sealed) < NONCE_BYTES + _TAG_BYTES:
            raise CryptoError(_UNWRAP_FAILED)
        try:
            return self._aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
        except InvalidTag:
            raise CryptoError(_UNWRAP_FAILED) from None

    def audit_key(self) -> bytes:
        return self._audit

    def __repr__(self) -> str:
        return f"FileKek({self.id!r})"


class KeyRing:
    """Key-encryption keys by id; ``active`` wraps new material, every key in the ring unwraps.

    File KEKs are named by their version ("k1"); a KEK held by a PKCS#11 token by
    ``pkcs11:<key label>``. A `resolve` function finds KEKs not listed up front (a token key
    another process added, during an online rotation): a blob names its KEK, so the ring asks
    for it the first time it is needed."""

    def __init__(self, keys: Mapping[str, bytes | Kek], active: str, *,
                 resolve: Callable[[str], Kek | None] | None = None,
                 executor: Any = None) -> None:
        if not keys and resolve is None:
            raise ValueError("key ring is empty")
        self._keks: dict[str, Kek] = {}
        for version, key in keys.items():
            if isinstance(key, Kek):
                if not isinstance(version, str) or not _KEK_ID_RE.fullmatch(version):
                    raise ValueError("key ids must be a version or 'pkcs11:<label>'")
                self._keks[version] = key
                continue
            if not isinstance(version, str) or not _VERSION_RE.fullmatch(version):
                raise ValueError("key versions must match [A-Za-z0-9_-]{1,32}")
            if not isinstance(key, bytes) or len(key) != KEY_BYTES:
                raise ValueError("key-encryption keys must be 32 bytes")
            # Keep only AESGCM objects: no raw key attribute to leak through debugging or repr.
            self._keks[version] = FileKek(version, key)
        if active not in self._keks and (resolve is None or not _KEK_ID_RE.fullmatch(active)):
            raise ValueError("active key version is not in the key ring")
        self._resolve = resolve
        self._audit: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.active = active
        self.executor = executor
        self.versions = tuple(self._keks) + (() if active in self._keks else (active,))

    @property
    def remote(self) -> bool:
        """Whether wrapping or unwrapping may block on a device (run it in `executor`)."""
        return self.executor is not None

    def kek(self, kek_id: str) -> Kek:
        """The KEK with this id; `CryptoError` when the ring has none."""
        found = self._keks.get(kek_id)
        if found is None and self._resolve is not None and _KEK_ID_RE.fullmatch(kek_id or ""):
            found = self._resolve(kek_id)
            if found is not None:
                with self._lock:
                    found = self._keks.setdefault(kek_id, found)
        if found is None:
            raise CryptoError("tenant key is wrapped by a key-encryption key not in the key ring")
        return found

    def holds(self, kek_id: str) -> bool:
        """Whether the ring has (or its `resolve` finds) the KEK with this id."""
        try:
            self.kek(kek_id)
        except CryptoError:
            return False
        return True

    def with_active(self, kek_id: str) -> KeyRing:
        """The same keys, with `kek_id` wrapping new material (a rotation's target)."""
        self.kek(kek_id)
        ring = KeyRing(dict(self._keks), kek_id, resolve=self._resolve, executor=self.executor)
        ring._audit = self._audit
        return ring

    def audit_mac(self, message: bytes, version: str | None = None) -> str:
        """HMAC-SHA256 of `message` under the audit key of `version` (the active one by
        default), hex. Unknown version: CryptoError."""
        version = version or self.active
        key = self._audit.get(version)
        if key is None:
            if not isinstance(version, str):
                raise CryptoError("audit event signed under a key version not in the key ring")
            try:
                key = self.kek(version).audit_key()
            except CryptoError:
                raise CryptoError("audit event signed under a key version not in the key "
                                  "ring") from None
            self._audit[version] = key
        return hmac.new(key, message, hashlib.sha256).hexdigest()

    def __repr__(self) -> str:
        return f"KeyRing(versions={self.versions!r}, active={self.active!r})"

    @classmethod
    def from_spec(cls, spec: str) -> KeyRing:
        """Parse ``"k1:<base64url>,k2:<base64url>"``; the last entry is active."""
        keys = parse_spec(spec)
        return cls(keys, list(keys)[-1])

    @staticmethod
    def generate_spec() -> str:
        return "k1:" + _b64e(os.urandom(KEY_BYTES))

    def wrap(self, key: bytes, *, tenant_id: str, slot: str) -> str:
        aad = _aad(_WRAP_LABEL, tenant_id, self.active, slot)
        return f"{self.active}.{_b64e(self.kek(self.active).seal(key, aad))}"

    def unwrap(self, blob: str, *, tenant_id: str, slot: str) -> bytes:
        version, _, sealed = blob.partition(".")
        kek = self.kek(version)
        try:
            raw = _b64d(sealed)
        except ValueError:
            raise CryptoError(_UNWRAP_FAILED) from None
        key = kek.open(raw, _aad(_WRAP_LABEL, tenant_id, version, slot))
        if len(key) != KEY_BYTES:
            raise CryptoError(_UNWRAP_FAILED)
        return key

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` off the event loop when the ring's keys live in a device, inline
        otherwise (a file KEK's AES-GCM costs microseconds)."""
        if self.executor is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)


def parse_spec(spec: str) -> dict[str, bytes]:
    """``"k1:<base64url>,k2:<base64url>"`` as versions and key bytes, in order."""
    # Errors name entries by position only: a mangled spec may hold key bytes anywhere.
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("key spec is empty")
    keys: dict[str, bytes] = {}
    for n, entry in enumerate(spec.split(","), 1):
        version, sep, encoded = entry.strip().partition(":")
        if not sep or not _VERSION_RE.fullmatch(version):
            raise ValueError(f"key spec entry {n}: expected '<version>:<base64url key>'")
        if version in keys:
            raise ValueError(f"key spec entry {n}: duplicate key version")
        try:
            key = _b64d(encoded.strip().rstrip("="))
        except ValueError:
            raise ValueError(f"key spec entry {n}: key is not base64url") from None
        if len(key) != KEY_BYTES:
            raise ValueError(f"key spec entry {n}: key must decode to 32 bytes")
        keys[version] = key
    return keys


def _parse_stored(stored: Mapping[str, str]) -> tuple[str, dict[str, str], str]:
    values = [stored.get(name) for name in _STORED_FIELDS]
    if not all(isinstance(value, str) for value in values):
        raise CryptoError("tenant key material is incomplete")
    active, deks_text, hmac_blob = values
    wrapped: dict[str, str] = {}
    for entry in deks_text.split(","):
        version, sep, blob = entry.partition(":")
        if not sep or not _VERSION_RE.fullmatch(version) or version in wrapped:
            raise CryptoError(_UNWRAP_FAILED)
        wrapped[version] = blob
    if active not in wrapped:
        raise CryptoError(_UNWRAP_FAILED)
    return active, wrapped, hmac_blob


def _unwrap_all(ring: KeyRing, tenant_id: str, stored: Mapping[str, str]):
    active, wrapped, hmac_blob = _parse_stored(stored)
    deks = {v: ring.unwrap(b, tenant_id=tenant_id, slot=f"dek:{v}") for v, b in wrapped.items()}
    return deks, active, ring.unwrap(hmac_blob, tenant_id=tenant_id, slot="hmac")


def _store(ring: KeyRing, tenant_id: str, deks: Mapping[str, bytes], active: str,
           hmac_key: bytes) -> dict[str, str]:
    wrapped = (f"{v}:{ring.wrap(k, tenant_id=tenant_id, slot=f'dek:{v}')}" for v, k in deks.items())
    return {
        "dek_version": active,
        "wrapped_deks": ",".join(wrapped),
        "wrapped_hmac_key": ring.wrap(hmac_key, tenant_id=tenant_id, slot="hmac"),
    }


def new_tenant_key_material(ring: KeyRing, tenant_id: str) -> dict[str, str]:
    """Fresh random DEK ("d1") and fingerprint key, wrapped under the active KEK."""
    return _store(ring, tenant_id, {"d1": os.urandom(KEY_BYTES)}, "d1", os.urandom(KEY_BYTES))


def rotate_tenant_dek(ring: KeyRing, tenant_id: str, stored: Mapping[str, str]) -> dict[str, str]:
    """Add DEK ``d<n+1>`` as active; old DEKs stay for decryption. All blobs use the active KEK."""
    deks, _, hmac_key = _unwrap_all(ring, tenant_id, stored)
    numbers = [int(v[1:]) for v in deks if v[:1] == "d" and v[1:].isdigit()]
    new_version = f"d{max(numbers, default=0) + 1}"
    deks[new_version] = os.urandom(KEY_BYTES)
    return _store(ring, tenant_id, deks, new_version, hmac_key)


def rewrap(ring: KeyRing, tenant_id: str, stored: Mapping[str, str]) -> dict[str, str]:
    """Same keys, every blob rewrapped under the ring's active KEK (KEK rotation)."""
    return _store(ring, tenant_id, *_unwrap_all(ring, tenant_id, stored))


def needs_rewrap(ring: KeyRing, stored: Mapping[str, str]) -> bool:
    """True if any blob is wrapped by a KEK other than the active one."""
    _, wrapped, hmac_blob = _parse_stored(stored)
    blobs = [*wrapped.values(), hmac_blob]
    return any(blob.partition(".")[0] != ring.active for blob in blobs)


class TenantKeys:
    """One tenant's unwrapped keys: encrypts/decrypts values, computes keyed fingerprints."""

    def __init__(self, tenant_id: str, deks: Mapping[str, bytes], active: str,
                 hmac_key: bytes) -> None:
        self.tenant_id = tenant_id
        self.dek_version = active
        self._aead = {version: AESGCM(key) for version, key in deks.items()}
        self._hmac_key = hmac_key
        self._aad_head = _aad(_VALUE_LABEL, tenant_id)
        self._aad_tails: dict[tuple[str, str], bytes] = {}

    def __repr__(self) -> str:
        return f"TenantKeys(tenant_id={self.tenant_id!r}, dek_version={self.dek_version!r})"

    @classmethod
    def unwrap(cls, ring: KeyRing, tenant_id: str, stored: Mapping[str, str]) -> TenantKeys:
        return cls(tenant_id, *_unwrap_all(ring, tenant_id, stored))

    def _value_aad(self, token_id: str, field: str, version: str) -> bytes:
        """`_aad(_VALUE_LABEL, tenant id, token_id, field, version)`, from parts made once: the
        label and tenant, and each (field, version) pair."""
        tail = self._aad_tails.get((field, version))
        if tail is None:
            tail = _aad(field, version)
            if len(self._aad_tails) < _AAD_TAILS_KEPT:
                self._aad_tails[(field, version)] = tail
        token = token_id.encode()
        return b"".join((self._aad_head, len(token).to_bytes(4, "big"), token, tail))

    def encrypt(self, plaintext: bytes, *, token_id: str, field: str = "data") -> str:
        version = self.dek_version
        sealed = _seal(self._aead[version], plaintext, self._value_aad(token_id, field, version))
        return f"v1.{version}.{sealed}"

    def decrypt(self, blob: str, *, token_id: str, field: str = "data") -> bytes:
        try:
            fmt, version, sealed = blob.split(".")
            aead = self._aead.get(version) if fmt == "v1" else None
            if aead is None:
                raise ValueError("unknown format or key version")
            return _open(aead, sealed, self._value_aad(token_id, field, version))
        except (ValueError, TypeError, AttributeError, InvalidTag):
            raise CryptoError("ciphertext could not be authenticated") from None

    def encrypt_json(self, value: Any, *, token_id: str, field: str = "data") -> str:
        if orjson is not None:
            raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        else:  # pragma: no cover
            raw = json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")
        return self.encrypt(raw, token_id=token_id, field=field)

    def decrypt_json(self, blob: str, *, token_id: str, field: str = "data") -> Any:
        raw = self.decrypt(blob, token_id=token_id, field=field)
        try:
            return orjson.loads(raw) if orjson is not None else json.loads(raw)
        except ValueError:
            pass
        # Raised outside the except block: JSON errors carry the document (plaintext) and
        # must not survive as __context__ for a logger or error reporter to print.
        raise CryptoError("decrypted value is not valid JSON")

    def fingerprint(self, value: str) -> str:
        """Keyed, per-tenant HMAC-SHA256 of ``value`` (43 chars base64url)."""
        return _b64e(hmac.new(self._hmac_key, b"fp:" + value.encode(), hashlib.sha256).digest())

    def index_value(self, name: str, value: str) -> str:
        """Keyed search-index value; ``name`` is bound so equal values in other indexes differ."""
        message = b"ix:" + _aad(name, value)
        return _b64e(hmac.new(self._hmac_key, message, hashlib.sha256).digest())


class TenantKeyCache:
    """Small LRU of unwrapped ``TenantKeys`` keyed by tenant and a digest of the stored material,
    so rotated or rewrapped material is a new entry and tampered material is unwrapped (and fails)
    instead of being served from cache."""

    def __init__(self, ring: KeyRing, max_size: int = 1024,
                 reload: Callable[[], KeyRing] | None = None) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self._ring = ring
        # KEK rotation online (`vaultgraph keys rotate`): material wrapped under a version this
        # ring lacks makes the cache re-read the ring (at most once per second), so a running
        # service follows a new key added to the key file without a restart.
        self._reload = reload
        self._reloaded_at = 0.0
        self._max_size = max_size
        self._entries: OrderedDict[tuple[str, bytes], TenantKeys] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def _cache_key(self, tenant_id: str, stored: Mapping[str, str]) -> tuple[str, bytes]:
        material = _aad(*(str(stored.get(name, "")) for name in _STORED_FIELDS))
        return (tenant_id, hashlib.sha256(material).digest())

    def _cached(self, key: tuple[str, bytes]) -> TenantKeys | None:
        with self._lock:
            keys = self._entries.get(key)
            if keys is not None:
                self._entries.move_to_end(key)
            return keys

    def get(self, tenant_id: str, stored: Mapping[str, str]) -> TenantKeys:
        """The tenant's keys, unwrapped here on a miss (blocking when the KEK is in a token:
        on an event loop, use `aget`)."""
        key = self._cache_key(tenant_id, stored)
        return self._cached(key) or self._unwrap(key, tenant_id, stored)

    async def aget(self, tenant_id: str, stored: Mapping[str, str]) -> TenantKeys:
        """`get` for the event loop: a miss is unwrapped in the ring's executor when the KEK
        is in a token, so cold tenants never stall the loop or queue behind one session."""
        key = self._cache_key(tenant_id, stored)
        cached = self._cached(key)
        if cached is not None:
            return cached
        return await self._ring.run(self._unwrap, key, tenant_id, stored)

    def _unwrap(self, key: tuple[str, bytes], tenant_id: str,
                stored: Mapping[str, str]) -> TenantKeys:
        # Unwrap outside the lock; a race costs at most one duplicate unwrap.
        try:
            keys = TenantKeys.unwrap(self._ring, tenant_id, stored)
        except CryptoError:
            if not self._reload_for(stored):
                raise
            keys = TenantKeys.unwrap(self._ring, tenant_id, stored)
        with self._lock:
            self._entries[key] = keys
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_size:
                self._entries.popitem(last=False)
        return keys

    def _reload_for(self, stored: Mapping[str, str]) -> bool:
        """Re-read the ring if the material names a KEK version it lacks; True if it now has
        every version named."""
        try:
            _, wrapped, hmac_blob = _parse_stored(stored)
        except CryptoError:
            return False
        # Token keys are found by the ring itself; only file versions need the file re-read.
        wanted = {blob.partition(".")[0] for blob in (*wrapped.values(), hmac_blob)
                  if not blob.startswith("pkcs11:")}
        if self._reload is None or wanted <= set(self._ring.versions):
            return False
        now = time.monotonic()
        if now - self._reloaded_at < 1.0:
            return False
        self._reloaded_at = now
        try:
            ring = self._reload()
        except (ValueError, OSError):
            return False
        self._ring = ring
        return wanted <= set(ring.versions)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
