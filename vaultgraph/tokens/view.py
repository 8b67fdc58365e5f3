"""Stored token → response body, under the caller's read transform (reveal, mask or redact)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ..auth.rules import MASK, REVEAL
from ..crypto import CryptoError, TenantKeys
from ..errors import IntegrityFailure
from ..expressions import ExpressionError, compile_mask, render_mask
from .fields import format_datetime, format_stored
from .stored import StoredToken
from .types import get_type

log = logging.getLogger(__name__)

# Fields of the cut-down view: a dedup match the caller cannot read.
SUMMARY_FIELDS = ("id", "type", "tenant_id", "fingerprint", "containers")
# A created child token shows these, never its data, mask or search indexes.
CHILD_FIELDS = ("id", "tenant_id", "type", "containers", "created_by", "created_at", "metadata",
                "fingerprint", "fingerprint_expression", "expires_at")


def decrypt_field(keys: TenantKeys, token: StoredToken, field: str) -> Any:
    blob = token.ciphertext(field)
    if blob is None:
        return None
    try:
        return keys.decrypt_json(blob, token_id=token.id, field=field)
    except CryptoError:
        # A ciphertext that fails authentication was altered or moved: never answer with it.
        log.error("token ciphertext failed authentication", extra={"token_id": token.id,
                                                                    "field": field})
        raise IntegrityFailure() from None


def effective_mask(token: StoredToken, mask: Any) -> Any:
    return mask if mask is not None else _default_mask(token.type)


def _default_mask(type_name: str) -> Any:
    """A type's default mask as plain JSON values, made once per type: shared by every response
    that shows it, so never mutated."""
    return _default_masking(type_name)[0]


@functools.cache
def _default_masking(type_name: str) -> tuple[Any, Callable[[Any], Any] | None]:
    """A type's default mask (plain JSON values) and its renderer (`compile_mask`), made once
    per type: every token of the type shown masked without a mask of its own renders it."""
    token_type = get_type(type_name)
    if token_type is None or token_type.default_mask is None:
        return None, None
    mask = _plain(token_type.default_mask)
    return mask, compile_mask(mask)


def _plain(value: Any) -> Any:
    """Type defaults are read-only mappings; responses want plain JSON values."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def present(token: StoredToken, transform: str, keys: TenantKeys, *, data: Any = None,
            mask: Any = None, plaintext_known: bool = False, shows_data: bool = True) -> dict:
    """The response body of one token. `data`/`mask` may be passed when already in hand.
    Without `shows_data` (an answer that never shows them: a created child token) its data
    and mask are left out, nothing is rendered; stored ones are still decrypted (checked)."""
    out: dict[str, Any] = {
        "id": token.id,
        "tenant_id": token.tenant_id,
        "type": token.type,
    }
    if transform in (REVEAL, MASK):
        if not plaintext_known:
            data = decrypt_field(keys, token, "data")
            mask = decrypt_field(keys, token, "mask")
    if shows_data and transform in (REVEAL, MASK):
        if mask is None:
            shown_mask, render_default = _default_masking(token.type)
        else:
            shown_mask, render_default = mask, None
        if transform == REVEAL:
            out["data"] = data
        elif shown_mask is not None:
            try:
                out["data"] = (render_mask(shown_mask, data=data) if render_default is None
                               else render_default(data))
            except ExpressionError:
                log.warning("mask could not be rendered", extra={"token_id": token.id})
        if shown_mask is not None:
            out["mask"] = shown_mask
    if transform == REVEAL:
        # A masked reader sees a card's BIN and last 4; with its fingerprint too, one that may
        # create tokens could hash candidates until one matches (docs/security.md).
        out["fingerprint"] = token.fingerprint
    out["fingerprint_expression"] = token.fingerprint_expression
    out["containers"] = list(token.containers)
    out["metadata"] = dict(token.metadata or {})
    out["search_indexes"] = list(token.search_indexes)
    out["created_by"] = token.created_by
    out["created_at"] = format_stored(token.created_at_text, token.created_at)
    if token.modified_at is not None:
        out["modified_by"] = token.modified_by
        out["modified_at"] = _iso(token.modified_at)
    if token.expires_at is not None:
        out["expires_at"] = _iso(token.expires_at)
    return out


def summary(token: StoredToken) -> dict:
    """The cut-down view of a dedup match the caller cannot read."""
    return {"id": token.id, "type": token.type, "tenant_id": token.tenant_id,
            "fingerprint": token.fingerprint, "containers": list(token.containers)}


def child_view(body: dict) -> dict:
    return {k: body[k] for k in CHILD_FIELDS if k in body}


def _iso(value: datetime | None) -> str | None:
    return None if value is None else format_datetime(value)
