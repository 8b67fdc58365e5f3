"""A token as the repository returns it: ciphertext and keyed digests, never plaintext."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from .fields import parse_stored


@dataclass(frozen=True, slots=True)
class StoredToken:
    id: str
    tenant_id: str
    type: str
    containers: tuple[str, ...]
    data_ct: str | None = None
    mask_ct: str | None = None
    fingerprint: str | None = None
    fingerprint_expression: str | None = None
    metadata: Mapping[str, str] | None = None
    search_indexes: tuple[str, ...] = ()
    deduplicate_token: bool | None = None
    created_by: str | None = None
    created_at: datetime | None = None
    modified_by: str | None = None
    modified_at: datetime | None = None
    expires_at: datetime | None = None
    # `created_at` as the statement returned it, when as text (`format_stored` shows it).
    created_at_text: str | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> StoredToken:
        """From a node's properties as the driver returns them (temporal values converted)."""
        raw_metadata = props.get("metadata")
        return cls(
            id=props["id"],
            tenant_id=props["tenant_id"],
            type=props["type"],
            containers=tuple(props.get("containers") or ()),
            data_ct=props.get("data_ct"),
            mask_ct=props.get("mask_ct"),
            fingerprint=props.get("fingerprint"),
            fingerprint_expression=props.get("fingerprint_expression"),
            metadata=orjson.loads(raw_metadata) if raw_metadata else {},
            search_indexes=tuple(props.get("search_indexes") or ()),
            deduplicate_token=props.get("deduplicate_token"),
            created_by=props.get("created_by"),
            created_at=_native(created_at := props.get("created_at")),
            modified_by=props.get("modified_by"),
            modified_at=_native(props.get("modified_at")),
            expires_at=_native(props.get("expires_at")),
            created_at_text=created_at if type(created_at) is str else None,
        )

    def ciphertext(self, field: str) -> str | None:
        return self.data_ct if field == "data" else self.mask_ct


def _native(value: Any) -> datetime | None:
    """A stored time: ISO 8601 text from the statements' @token(t) fragment (a named zone's
    "[Area/City]" suffix dropped: the offset before it is exact), or a driver temporal value."""
    if value is None:
        return None
    if isinstance(value, str):
        return parse_stored(value)
    return value.to_native() if hasattr(value, "to_native") else value
