"""Webhooks: the events the vault sends out, their payloads and their signatures.

Signatures follow the Standard Webhooks specification: a secret is `whsec_` and the base64 of
32 random bytes; a delivery carries `webhook-id` (the event's id, the same on every retry),
`webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature`: `v1,` and the
base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed with the secret's decoded bytes; while an
old secret still signs (a rotation's overlap), one `v1,` signature per secret, space-separated.

A payload names what changed and never holds a token's data, mask, metadata values,
fingerprint or search index values.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32

TOKEN_CREATED = "token.created"
TOKEN_UPDATED = "token.updated"
TOKEN_DELETED = "token.deleted"
TOKEN_LINKED = "token.linked"
TOKEN_UNLINKED = "token.unlinked"
WEBHOOK_TEST = "webhook.test"
ALL = "*"
EVENT_TYPES = (TOKEN_CREATED, TOKEN_UPDATED, TOKEN_DELETED, TOKEN_LINKED, TOKEN_UNLINKED,
               WEBHOOK_TEST)
# Why a token was deleted (`data.reason` of token.deleted).
DELETE_REASONS = ("request", "expired", "deduplicated")
SYSTEM = "system"  # `data.application_id` of a change no application made (the expiry sweep)

ENABLED = "enabled"
DISABLED = "disabled"
STATUSES = (ENABLED, DISABLED)


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_bytes(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,<signature>` of a message under one secret."""
    message = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_bytes(secret), message, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(secrets_: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """`webhook-signature`: a signature under each secret that signs now."""
    return " ".join(sign(s, msg_id, timestamp, body) for s in secrets_)


def headers(secrets_: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": signature_header(secrets_, msg_id, timestamp, body),
            "Content-Type": "application/json"}


def payload(delivery: Mapping[str, Any]) -> bytes:
    """The JSON body of a stored delivery: the same bytes on every attempt."""
    kind = delivery["type"]
    if kind == WEBHOOK_TEST:
        data: dict[str, Any] = {"webhook_id": delivery["webhook_id"]}
    else:
        data = {"id": delivery["token_id"], "type": delivery["token_type"],
                "containers": list(delivery.get("containers") or []),
                "application_id": delivery.get("application_id") or SYSTEM}
        if kind in (TOKEN_LINKED, TOKEN_UNLINKED):
            data["parent_id"] = delivery.get("parent_id")
            data["child_id"] = delivery.get("child_id")
        elif kind == TOKEN_CREATED and delivery.get("parent_id"):
            data["parent_id"] = delivery["parent_id"]
        elif kind == TOKEN_DELETED:
            data["reason"] = delivery.get("reason")
            data["merged_into"] = delivery.get("merged_into")
    return orjson.dumps({"id": delivery["event_id"], "type": kind,
                         "timestamp": delivery["at"], "tenant_id": delivery["tenant_id"],
                         "data": data})
