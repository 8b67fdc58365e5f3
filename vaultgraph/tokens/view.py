"""Stored token → response body, under the caller's read transform (reveal, mask or redact)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson

from .. import problems
from ..auth.rules import MASK, REVEAL
from ..crypto import CryptoError, TenantKeys
from ..expressions import ExpressionError, render_mask
from .fields import format_datetime
from .types import get_type

log = logging.getLogger(__name__)

# Fields of the cut-down view: a dedup match the caller cannot read.
SUMMARY_FIELDS = ("id", "type", "tenant_id", "fingerprint", "containers")
# A created child token shows these (spec §4.8).
CHILD_FIELDS = ("id", "tenant_id", "type", "containers", "created_by", "created_at", "metadata",
                "fingerprint", "fingerprint_expression", "expires_at")


class IntegrityError(problems.Problem):
    status = 500
    slug = "integrity"
    title = "Internal Server Error"


def decrypt_field(keys: TenantKeys, node: dict, field: str) -> Any:
    blob = node.get(f"{field}_ct")
    if blob is None:
        return None
    try:
        return keys.decrypt_json(blob, token_id=node["id"], field=field)
    except CryptoError:
        # A ciphertext that fails authentication was altered or moved: never answer with it.
        log.error("token ciphertext failed authentication", extra={"token_id": node["id"],
                                                                    "field": field})
        raise IntegrityError("The token's stored data failed an integrity check.") from None


def effective_mask(node: dict, mask: Any) -> Any:
    if mask is not None:
        return mask
    token_type = get_type(node["type"])
    if token_type is None or token_type.default_mask is None:
        return None
    return _plain(token_type.default_mask)


def _plain(value: Any) -> Any:
    """Type defaults are read-only mappings; responses want plain JSON values."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def present(node: dict, transform: str, keys: TenantKeys, *, data: Any = None,
            mask: Any = None, plaintext_known: bool = False) -> dict:
    """The response body of one token. `data`/`mask` may be passed when already in hand."""
    out: dict[str, Any] = {
        "id": node["id"],
        "tenant_id": node["tenant_id"],
        "type": node["type"],
    }
    if transform in (REVEAL, MASK):
        if not plaintext_known:
            data = decrypt_field(keys, node, "data")
            mask = decrypt_field(keys, node, "mask")
        shown_mask = effective_mask(node, mask)
        if transform == REVEAL:
            out["data"] = data
        elif shown_mask is not None:
            try:
                out["data"] = render_mask(shown_mask, data=data)
            except ExpressionError:
                log.warning("mask could not be rendered", extra={"token_id": node["id"]})
        if shown_mask is not None:
            out["mask"] = shown_mask
    out["fingerprint"] = node.get("fingerprint")
    out["fingerprint_expression"] = node.get("fingerprint_expression")
    out["containers"] = list(node.get("containers") or ())
    out["metadata"] = orjson.loads(node["metadata"]) if node.get("metadata") else {}
    out["search_indexes"] = list(node.get("search_indexes") or ())
    out["created_by"] = node.get("created_by")
    out["created_at"] = _iso(node.get("created_at"))
    if node.get("modified_at") is not None:
        out["modified_by"] = node.get("modified_by")
        out["modified_at"] = _iso(node.get("modified_at"))
    if node.get("expires_at") is not None:
        out["expires_at"] = _iso(node["expires_at"])
    return out


def summary(node: dict) -> dict:
    return {k: (list(node[k]) if k == "containers" else node.get(k)) for k in SUMMARY_FIELDS}


def redact_for_duplicate(body: dict) -> dict:
    """Spec §4.4: an update that lands on a token the caller cannot read hides its contents."""
    hidden = ("data", "metadata", "fingerprint_expression", "search_indexes", "mask")
    return {k: v for k, v in body.items() if k not in hidden}


def child_view(body: dict) -> dict:
    return {k: body[k] for k in CHILD_FIELDS if k in body}


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if hasattr(value, "to_native"):
        value = value.to_native()
    return format_datetime(value)
