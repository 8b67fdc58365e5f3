"""Start-up warm-up: every catalog statement planned before the process says ready.

Neo4j plans a statement the first time it sees it and caches the plan under the statement's
text and its parameters' types (a null and a string are different keys). On a freshly started
Neo4j the first requests paid for every plan (a create took 6-10 s; 16 at once ran past their
deadline), while `/ready` already said 200. So start-up sends `EXPLAIN` for every statement of
the catalog (the schema's aside) in the forms the service sends it: its own text, and for a
statement that writes, also with the audit prefix that `Database.write` adds inside a request
(`AUDIT_PREFIX`) — with parameters of the types the repositories send
(`SAMPLES`, by parameter name, and `OVERRIDES` where one statement differs). EXPLAIN plans and
caches without running anything. A statement added to the catalog is covered by this loop
without a change here; a new parameter name needs a sample (a unit test names any that lacks
one).

Where a parameter may be null or a value, the sample is the form a first request sends
(no parent, no expiry, no Idempotency-Key, the first page): the other forms are planned on
first use, as before.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import neo4j
from neo4j.exceptions import ClientError

from ..errors import Unavailable
from .audit_prefix import audited_text
from .database import Database
from .neo4j_errors import map_errors

_WHEN = datetime(2000, 1, 1, tzinfo=UTC)

# A value of the type the repositories send for each parameter name (only the type matters).
SAMPLES: dict[str, Any] = {
    "actor": "", "after": "", "after_at": "", "after_id": "", "application_id": "",
    "application_name": "", "batch": 1, "before_at": _WHEN, "before_id": "", "chain": "",
    "checkpoints": [], "child_id": "", "claim": "", "content_type": "", "created": [],
    "created_by": "", "cutoff": _WHEN, "dedup": False, "deleted_by": "", "depth": 1,
    "direction": "", "event": {}, "expired_actor": "", "expired_reason": "",
    "expires_at": None, "fingerprint": "", "hash": "", "head_seq": 1, "high": None,
    "high_inclusive": False, "id": "", "ids": None, "index_digests": [], "into": "", "key": "",
    "key_id": "", "key_material": {}, "lease": 1.0, "limit": 1, "linked": [], "low": None,
    "low_inclusive": False, "max_links": 1, "max_nodes": 1, "merged_into": None,
    "meta_kvs": [], "modified_by": "", "name": "", "new": {}, "old": {}, "operation": None,
    "outcome": None, "parent_id": "", "parent_prefixes": [], "permissions": [],
    "prefixes": [], "props": {}, "reason": "", "request_hash": "", "response_ct": "",
    "revoked_by": "", "rows": [], "rules": "", "since": _WHEN, "status": 1, "tenant_id": "",
    "token_id": None, "token_ids": [], "transforms": "", "ttl": 1.0, "type": "", "types": None,
    "until": _WHEN, "value": "", "versions": [],
    "changes": {}, "description": None, "destination_url": "", "header_allowlist": [],
    "busy": [], "containers": [], "delivered_ms": 1, "deliveries": [], "disable_after_ms": 1,
    "event_id": "", "events": [], "lease_ms": 1, "outcomes": [], "overlap_ms": 1,
    "retention_ms": 1, "room": {}, "room_default": 1, "scan": 1, "secret_ct": "", "url": "",
    # The audit prefix's (audited_params): no Idempotency-Key held.
    "audit": {}, "audit_at": "", "idem_application": None, "idem_key": None,
    "idem_claim": None,
}
# Statements that send a parameter with another type than the name's usual one.
_NO_APPLICATION = {"application_id": None}
OVERRIDES: dict[str, dict[str, Any]] = {
    "tokens/create": {"parent_id": None},
    "tokens/list_by_type": {"types": []},
    "tokens/list_by_ids": {"ids": []},
    "proxies/call": {"ids": []},
    "audit/list": _NO_APPLICATION,
    "audit/list_by_token": {**_NO_APPLICATION, "token_id": ""},
    "audit/list_by_operation": {**_NO_APPLICATION, "operation": ""},
    "audit/list_by_outcome": {**_NO_APPLICATION, "outcome": ""},
    "audit/chain_events": {"after": 1},
    "audit/export": {"after_at": _WHEN},
    "audit/prune_leftovers": {"after_at": _WHEN},
}

# Not planned here: the schema (applied, not planned) and the search statement, which takes
# seconds of Neo4j's planning on a cold server: it is planned once the service is ready
# (SearchRepository.prepare), and readiness does not wait for it.
NOT_HERE = ("schema/", "search/")

_PARAMETER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# What an EXPLAIN's summary says a statement does: "w" writes, "rw" reads and writes.
_WRITES = ("w", "rw")


def parameters(text: str) -> list[str]:
    """The `$parameter` names a statement's text uses, outside its comment lines."""
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("//"))
    return sorted(set(_PARAMETER.findall(code)))


def sample_parameters(name: str, text: str) -> dict[str, Any]:
    """Parameters of the types the service sends with statement `name` (`text`): the audit
    prefix's too when the text carries it. A name without a sample is sent as null."""
    own = OVERRIDES.get(name, {})
    return {p: own[p] if p in own else SAMPLES.get(p) for p in parameters(text)}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, datetime):
        return "datetime"
    return type(value).__name__


def signature(params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """A statement's parameters as Neo4j's plan cache tells them apart: name and type."""
    return tuple(sorted((name, _kind(value)) for name, value in params.items()))


@dataclass
class Prepared:
    """What the warm-up planned: (text, parameter types) of every form sent."""

    forms: set[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=set)
    statements: int = 0
    skipped: list[str] = field(default_factory=list)


async def prepare(db: Database, concurrency: int = 4) -> Prepared:
    """EXPLAIN every catalog statement (outside `schema/`) in the forms the service sends it,
    `concurrency` at a time. Raises `errors.Unavailable` when Neo4j cannot answer (start-up
    retries). A text Neo4j refuses as a syntax error is a part other statements are composed
    of, not a statement: it is skipped (and named in `Prepared.skipped`)."""
    prepared = Prepared()
    limit = asyncio.Semaphore(max(1, concurrency))

    async def explain(text: str, params: dict[str, Any]) -> str:
        async with limit, map_errors():
            async with asyncio.timeout(db.timeout), db.session() as session:
                result = await session.run(neo4j.Query("EXPLAIN " + text), params)
                summary = await result.consume()
        prepared.forms.add((text, signature(params)))
        return summary.query_type or ""

    async def planned(text: str, params: dict[str, Any]) -> str | None:
        """The statement's kind, or None when Neo4j refuses it as it stands."""
        try:
            return await explain(text, params)
        except ClientError as exc:
            if exc.code != "Neo.ClientError.Statement.SyntaxError":
                raise
            return None

    async def one(name: str) -> None:
        text = db.catalog.text(name)
        kind = await planned(text, sample_parameters(name, text))
        if kind is None:
            prepared.skipped.append(name)
            return
        prepared.statements += 1
        # A write may carry the prefix (unless it is one the prefix cannot precede, such as
        # `CALL { … } IN TRANSACTIONS`, which is never sent with it).
        if kind in _WRITES:
            audited = audited_text(text)
            await planned(audited, sample_parameters(name, audited))

    names = [n for n in db.catalog.names() if not n.startswith(NOT_HERE)]
    outcomes = await asyncio.gather(*(one(name) for name in names), return_exceptions=True)
    failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
    if isinstance(failed, TimeoutError):
        raise Unavailable("Neo4j did not answer the warm-up in time.") from None
    if failed is not None:
        raise failed
    prepared.skipped.sort()
    return prepared
