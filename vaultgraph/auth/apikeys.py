"""API keys: 256 random bits behind a scannable prefix, stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import re
import secrets

HEADER = "SVC-API-KEY"  # the only place a key is accepted (never a query string)
PREFIX = "vg_"
_SHAPE = re.compile(r"^vg_[A-Za-z0-9_-]{43}$")


def generate() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def well_formed(key: str) -> bool:
    return bool(_SHAPE.match(key))


def digest(key: str) -> str:
    # The lookup is by this digest through a unique index; keys have 256 bits of entropy, so a
    # fast hash is safe here (no password stretching needed) and no comparison of secrets
    # happens in Python at all. The index seek is on the digest, not the key.
    return hashlib.sha256(key.encode()).hexdigest()
