"""How the audit store keeps the ids it indexes (docs/adr/0026): a tenant's, an application's
and a token's, as 64-bit integers rather than text.

A UUID in its canonical text (36 lower-case characters, as the service makes them) is kept as
two integers, `<name>_key` (its first 8 bytes) and `<name>_rest` (its last 8): a range index
key of 10 bytes where the text took 39. The indexes hold only the key; a seek on it is checked
against the rest per event, so two ids whose first halves agree only cost a filtered row. Any
other id (a token id chosen by its caller, the application `system`, the start-up rehearsal's
tenant) keeps its text under its own name, with a 64-bit hash of it as its key. The text is
given back on reading (`expand_ids`), so what an event's MAC covers does not change. The API
key's id, which no index holds, is kept as its 16 bytes (`AS_BYTES`). A chain's id, 19 digits,
is kept as the 64-bit integer they name (`chain_number`), and a route the service names as
its number in `ROUTES` (docs/adr/0028)."""

from __future__ import annotations

import functools
import hashlib
import re
import struct
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

# The ids kept so, by the event field (or index key) naming them, and the names of the two
# integers each is kept as.
COMPACT = {"tenant_id": ("tenant_key", "tenant_rest"),
           "application_id": ("application_key", "application_rest"),
           "token_id": ("token_key", "token_rest")}
STORE_NAMES = tuple(n for pair in COMPACT.values() for n in pair)
# A UUID's canonical text: what `str(uuid.UUID(...))` gives, and only that (the text read back
# must be the text signed).
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Ids stored as their 16 bytes (three property blocks where the text takes four: an event's
# property records then hold it one record smaller, docs/adr/0026) and given back as text; no
# index holds them.
AS_BYTES = ("key_id",)
# A chain's id as the writer makes it (services/audit_writer.py `new_chain_id`): 19 digits, no
# leading zero. Kept as the integer they name where it fits 64 bits signed (the `(chain, seq)`
# index's key 10 bytes where the digits took 22); any other id keeps its text.
CHAIN = "chain"
_CHAIN_DIGITS = re.compile(r"[1-9][0-9]{18}")
_INT64_MAX = 2**63 - 1


# The routes an event names, as the middleware names them (method and template): each stored
# as its place in this table counting from 1, a small integer (one property block where the
# text took three: the event's property records one fewer, docs/adr/0028). Append only: a
# stored number names its route for ever, so an entry is never moved or removed. Any other
# route (a proxy call's, named by its proxy; one added and not listed here yet) keeps its text.
ROUTES = (
    "POST /tokens/search", "POST /tokens", "GET /tokens", "GET /tokens/{id}",
    "PATCH /tokens/{id}", "DELETE /tokens/{id}", "POST /tokenize", "POST /detokenize",
    "POST /tokens/{parent_id}/children/{child_id}",
    "DELETE /tokens/{parent_id}/children/{child_id}", "POST /tokens/{parent_id}/children",
    "GET /tokens/{parent_id}/children", "GET /tokens/{id}/parents", "GET /tokens/{id}/graph",
    "POST /applications", "GET /applications", "GET /applications/self",
    "GET /applications/{id}", "PUT /applications/{id}", "DELETE /applications/{id}",
    "POST /applications/{id}/keys", "GET /applications/{id}/keys",
    "DELETE /applications/{id}/keys/{key_id}", "GET /logs", "POST /proxies", "GET /proxies",
    "GET /proxies/{id}", "PATCH /proxies/{id}", "DELETE /proxies/{id}",
    "GET /proxy/{proxy_id}/{path}", "POST /proxy/{proxy_id}/{path}",
    "PUT /proxy/{proxy_id}/{path}", "PATCH /proxy/{proxy_id}/{path}",
    "DELETE /proxy/{proxy_id}/{path}", "OPTIONS /proxy/{proxy_id}/{path}", "POST /webhooks",
    "GET /webhooks", "GET /webhooks/{id}", "PATCH /webhooks/{id}", "DELETE /webhooks/{id}",
    "POST /webhooks/{id}/secret", "GET /webhooks/{id}/deliveries", "POST /webhooks/{id}/test",
    "POST /webhooks/{id}/deliveries/{event_id}/retry",
)
ROUTE_NUMBERS = {route: number for number, route in enumerate(ROUTES, 1)}


def route_number(route: Any) -> Any:
    """A route as it is stored: its number in `ROUTES`, or itself (its text, or None)."""
    return ROUTE_NUMBERS.get(route, route) if isinstance(route, str) else route


def chain_number(chain: Any) -> int | None:
    """The integer a chain's id is stored as, or None if it keeps its text."""
    if isinstance(chain, str) and _CHAIN_DIGITS.fullmatch(chain):
        number = int(chain)
        return number if number <= _INT64_MAX else None
    return None


def chain_forms(chain: str) -> list[Any]:
    """The forms events of a chain may hold its id in: its text (events stored before
    docs/adr/0028, or an id that is no number) and its integer, where it has one."""
    number = chain_number(chain)
    return [chain] if number is None else [chain, number]


# An event naming exactly one token (most do: a get, an update, a delete) holds it also as a
# scalar, indexed with the tenant and the time: "all events of token X" is a seek on that node
# index, with no relationship to store. An event naming several (a list page, a bulk call) gets
# an AUDIT_REF self-loop per token instead (cypher/audit/write_batch), as every event stored
# before this scalar did (cypher/audit/list_by_token reads both).
TOKEN_REF = "token_id"
# An event naming several tokens holds their list; when every one is a canonical UUID, as
# their 16 bytes each, one byte array (`compact_ids`): 16 bytes a token where the text took 40
# of the array store (a page's event 0.9 kB where the list took 2.2).
TOKENS = "token_ids"


def token_ref(event: Mapping[str, Any]) -> str | None:
    """The one token the event names, or None (none, or several)."""
    ids = event.get("token_ids")
    return ids[0] if ids and len(ids) == 1 else None


def token_scalar(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` (changed in place) with its tokens as stored: one as the scalar `TOKEN_REF`
    and no list, none as neither, several as the list."""
    if (ref := token_ref(fields)) is not None:
        fields[TOKEN_REF] = ref
    ids = fields.get("token_ids")
    if ids is not None and len(ids) <= 1:
        del fields["token_ids"]
    return fields


@functools.lru_cache(maxsize=4096)
def id_parts(value: str | None) -> tuple[int | None, int | None, str | None]:
    """(key, rest, text) of an id: a canonical UUID as its two halves and no text; any other
    text as its 64-bit hash, no rest, and the text; None as nothing. Kept for the ids seen
    last: every event names its tenant and application, and a write's event is put in its
    stored form twice (the write's, then the link's)."""
    if value is None:
        return None, None, None
    if _CANONICAL_UUID.fullmatch(value):  # the halves straight from the hex: no uuid.UUID
        raw = bytes.fromhex(value.replace("-", ""))
        return (int.from_bytes(raw[:8], "big", signed=True),
                int.from_bytes(raw[8:], "big", signed=True), None)
    digest = hashlib.blake2b(value.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True), None, value


@functools.lru_cache(maxsize=64)
def _halves(count: int) -> struct.Struct:
    """Unpacks `count` 16-byte UUIDs into their two halves, big-endian and signed."""
    return struct.Struct(">" + "qq" * count)


def uuid_bytes(ids: Sequence[str]) -> bytes | None:
    """The ids' 16 bytes each, together, when every one is a canonical UUID (as the ids of a
    page the service made are); else None. Checked and converted together: one text, one
    `bytes.fromhex`, about a tenth of what one id at a time costs."""
    count = len(ids)
    # Each id 36 long, or ids that join into UUIDs (u[:35], u[35:] + v) would pass as them.
    if not all(len(value) == 36 for value in ids):
        return None
    joined = "".join(ids)
    if (joined.count("-") != 4 * count
            or not all(joined[at::36] == "-" * count for at in (8, 13, 18, 23))):
        return None
    digits = joined.replace("-", "")
    if digits != digits.lower():  # canonical text is lower case; upper case keeps its text
        return None
    try:
        raw = bytes.fromhex(digits)
    except ValueError:
        return None
    return raw if len(raw) == 16 * count else None  # fromhex skips whitespace: none may be


def uuid_texts(raw: bytes) -> list[str]:
    """The canonical texts of the UUIDs `uuid_bytes` gave."""
    digits = raw.hex()
    return [f"{digits[at:at + 8]}-{digits[at + 8:at + 12]}-{digits[at + 12:at + 16]}-"
            f"{digits[at + 16:at + 20]}-{digits[at + 20:at + 32]}"
            for at in range(0, len(digits), 32)]


def id_halves(ids: Sequence[str] | bytes) -> list[tuple[int, int | None]]:
    """Each id's key and rest, as `id_parts` gives them, for the many ids one event names (its
    AUDIT_REFs', cypher/audit/write_batch), from the list as the store keeps it
    (`compact_ids`): their bytes when all are canonical UUIDs (`uuid_bytes`, so they are
    checked and converted once), else the list, id by id. Uncached: a page's ids would evict
    the tenants' and applications' entries `id_parts` keeps."""
    if isinstance(ids, bytes | bytearray):
        halves = _halves(len(ids) // 16).unpack(ids)
        return list(zip(halves[::2], halves[1::2], strict=True))
    return [id_parts(value)[:2] for value in ids]  # type: ignore[misc]


def id_text(key: Any, rest: Any) -> str:
    """The canonical UUID text of the two halves `id_parts` gave."""
    return str(uuid.UUID(bytes=key.to_bytes(8, "big", signed=True)
                         + rest.to_bytes(8, "big", signed=True)))


def compact_ids(fields: Mapping[str, Any], *, in_place: bool = False) -> dict[str, Any]:
    """`fields` with each id of `COMPACT` they hold as `id_parts` keeps it, each of
    `AS_BYTES` that is a canonical UUID as its bytes (a null left as it is), a list of
    several tokens that are all canonical UUIDs as their bytes (`TOKENS`), the chain's id as
    `chain_number` gives it, where it does, and the route as `route_number`; `in_place`,
    `fields` itself, changed."""
    out = fields if in_place and isinstance(fields, dict) else dict(fields)
    if (number := chain_number(out.get(CHAIN))) is not None:
        out[CHAIN] = number
    if "route" in out:
        out["route"] = route_number(out["route"])
    for name in AS_BYTES:
        value = out.get(name)
        if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
            out[name] = bytes.fromhex(value.replace("-", ""))
    tokens = out.get(TOKENS)
    if isinstance(tokens, list) and len(tokens) > 1 and (raw := uuid_bytes(tokens)) is not None:
        out[TOKENS] = raw
    for name, (key_name, rest_name) in COMPACT.items():
        value = out.get(name)
        if not isinstance(value, str):
            continue
        key, rest, _ = id_parts(value)
        out[key_name] = key
        if rest is not None:
            out[rest_name] = rest
            del out[name]
    return out


def expand_ids(props: dict[str, Any]) -> dict[str, Any]:
    """Stored properties with each id `compact_ids` split given back as its text (in place)."""
    if isinstance(props.get(CHAIN), int):
        props[CHAIN] = str(props[CHAIN])
    route = props.get("route")
    if isinstance(route, int) and 0 < route <= len(ROUTES):
        props["route"] = ROUTES[route - 1]
    for name in AS_BYTES:
        value = props.get(name)
        if isinstance(value, bytes | bytearray) and len(value) == 16:
            props[name] = str(uuid.UUID(bytes=bytes(value)))
    tokens = props.get(TOKENS)
    if isinstance(tokens, bytes | bytearray) and tokens and len(tokens) % 16 == 0:
        props[TOKENS] = uuid_texts(bytes(tokens))
    for name, (key_name, rest_name) in COMPACT.items():
        rest = props.pop(rest_name, None)
        key = props.pop(key_name, None)
        if isinstance(rest, int) and isinstance(key, int) and name not in props:
            props[name] = id_text(key, rest)
    return props


def query_ids(**ids: str | None) -> dict[str, Any]:
    """Parameters naming ids for the log statements: each as its text (`<name>`, which events
    stored before these keys are sought by) and its key and rest."""
    out: dict[str, Any] = {}
    for name, value in ids.items():
        key_name, rest_name = COMPACT[name]
        key, rest, _ = id_parts(value)
        out.update({name: value, key_name: key, rest_name: rest})
    return out
