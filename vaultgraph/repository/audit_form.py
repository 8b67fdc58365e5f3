"""An audit event's stored form: the properties it is stored as, and what the statements that
store one take of it (audit/write_batch, the placed audit prefix). Shared by the audit
repository and the audit prefix (repository/audit_prefix.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..audit.ids import compact_ids, id_halves, id_parts, token_scalar
from .records import at_number

# What the store leaves out of an event (docs/adr/0024): `prev` repeats the MAC of the event
# before it in its chain, which is where every reader takes it from (audit/chain.py
# `verify_chain`, the pruner, cypher/audit/export); and `token_ids` unless it names several
# tokens: one is the scalar `token_id`, none is no property, and `event_of` gives the list back
# (no version ever stored a null list). And its MAC is stored as raw bytes, in two halves of
# 16 (`mac`, `mac_end`): 64 hex characters take a 128-byte string record of their own, while a
# byte array of 16 fits in the property record (three of its four 8-byte blocks; 32 bytes
# would not fit one property). Events stored before hold `prev`, the list and a hex MAC, which
# the readers use as they are.
DERIVED = ("prev",)
MAC_END = "mac_end"
MAC_HALF = 16


def stored_form(event: Mapping[str, Any]) -> dict[str, Any]:
    """The properties an event is stored as (its time apart): with its one token as the
    scalar `token_id`, and the ids the indexes hold as integers (audit/ids.py `compact_ids`)."""
    out = token_scalar({k: v for k, v in event.items() if k not in DERIVED})
    mac = out.get("mac")
    if isinstance(mac, str):
        raw = bytes.fromhex(mac)
        out["mac"], out[MAC_END] = raw[:MAC_HALF], raw[MAC_HALF:]
    return compact_ids(out, in_place=True)


def ref_parts(event: Mapping[str, Any], tokens: Any) -> dict[str, Any]:
    """What audit/write_batch gives an event naming several tokens, one `AUDIT_REF` self-loop
    a token: its tenant's key, and each token's key and rest (`ids.id_parts`,
    `ids.id_halves`; no rest for an id that is no UUID), from `tokens`, its list in its stored
    form (`stored_form`: None when it names one token or none, which it holds as its scalar).
    The AUDIT_REF index holds the keys; a seek checks the rest, or for an id with none the
    event's list. Each pair once (two ids a caller chose whose hashes agree would otherwise
    give one event twice to a seek's page). None for an event without a tenant either (refused
    before its key was known: no page of any tenant shows it)."""
    tenant_key = id_parts(event.get("tenant_id"))[0] if tokens is not None else None
    if tenant_key is None:
        return {"tenant_key": None, "refs": []}
    return {"tenant_key": tenant_key, "refs": [list(pair) for pair in
                                               dict.fromkeys(id_halves(tokens))]}


def placed_parts(event: Mapping[str, Any]) -> dict[str, Any]:
    """A write event (signed at its place in a chain of write events) as a write's statement
    (repository/audit_prefix.py) and audit/write_batch store it whole: `created_parts`, with
    its place in its stored form, which the statement finds it by."""
    parts = created_parts(event)
    parts["chain"], parts["seq"] = parts["fields"]["chain"], parts["fields"]["seq"]
    return parts


def created_parts(event: Mapping[str, Any]) -> dict[str, Any]:
    """An event no statement stored yet, as audit/write_batch takes it: its time as an integer
    (`at_number`), its AUDIT_REFs' keys (`ref_parts`) and its other fields, those without a
    value left out (a property that is not there reads as null, which is what was signed)."""
    stored = stored_form(event)
    fields = {k: v for k, v in stored.items() if k != "at" and v is not None}
    return {"at": at_number(event.get("at")), **ref_parts(event, stored.get("token_ids")),
            "fields": fields}
