"""An audit event: who did what to which tokens, with what outcome. Never data, masks,
metadata values, search-index values, fingerprints, keys or request bodies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

# The fields an event holds; `mac` covers all of them but itself.
FIELDS = (
    "id", "at", "tenant_id", "application_id", "key_id", "operation", "route", "token_ids",
    "outcome", "status", "transform", "transform_counts", "trace_id", "client_ip", "user_agent",
    "reason", "chain", "seq", "prev", "key_version",
)
# Fields only some events hold, signed only where present (so no MAC made before them changes):
# `kind` marks a write event, stored by its write's own statement in a chain of write events,
# or a block, stored by a batch in its lane's chain, which settles write events: `settles`
# names their chain, `pins` their numbers and `pin_macs` the MAC each holds (audit/chain.py).
SOME_FIELDS = ("kind", "settles", "pins", "pin_macs")
WRITE = "write"
BLOCK = "block"
OUTCOMES = ("success", "denied", "not_found", "invalid", "conflict", "rate_limited", "error",
            "unavailable")
MAX_USER_AGENT = 256
MAX_TOKEN_IDS = 1000  # a list page holds at most 100; bulk calls stay far below this
SYSTEM = "system"  # the application id of the service's own work (expiry sweeps)


def outcome_of(status: int) -> str:
    if status < 400:
        return "success"
    # 499: a request left unanswered (cancelled, the server stopping), as a 503 serves nothing
    return {401: "denied", 403: "denied", 404: "not_found", 409: "conflict",
            429: "rate_limited", 499: "unavailable", 503: "unavailable"}.get(
        status, "invalid" if status < 500 else "error")


def canonical(event: Mapping[str, Any]) -> bytes:
    """The bytes a MAC covers: every field of `FIELDS` and those of `SOME_FIELDS` it holds, but
    `mac`, sorted, as JSON."""
    signed = {k: event.get(k) for k in FIELDS}
    for k in SOME_FIELDS:
        if event.get(k) is not None:
            signed[k] = event[k]
    return orjson.dumps(signed, option=orjson.OPT_SORT_KEYS)


def bounded_text(value: str | None, limit: int) -> str | None:
    """A header value kept for the record: printable, at most `limit` characters."""
    if value is None:
        return None
    kept = value[:limit]
    if kept.isprintable():  # what clients send: checked in C, not character by character
        return kept
    return "".join(ch if ch.isprintable() else "?" for ch in kept)
