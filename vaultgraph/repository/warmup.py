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

A plan is not all a first request pays for: on a freshly started Neo4j the code that runs a
write (its operators, transaction state, locks, the commit's log append and index updates, the
audit trail's statement) had never run, and the first create after `/ready` still took seconds.
So start-up then rehearses the write path (`rehearse`): an API key's look-up, a token's create
(alone, and two written together), read (alone, and two together), update, link and delete, and
the audit writer's batches, each in a form the warm-up planned (audit prefix included; Neo4j
makes a plan runnable on its first run, not when it plans it: a create in a form only planned
took 0.8 s, in the rehearsed one 3 ms), for real, in one transaction that is committed (a
rolled-back one never reaches the commit's work: the first create after it still took 2-3 s) —
and then removed by `health/forget_rehearsal`. It all runs under a tenant id no tenant has
(`warm-up:` and a random UUID; tenant ids are UUIDs) with an audit chain of the same prefix: no
tenant, key or application is created, no tenant's list, search or trail can reach it while it
exists, and webhooks, which belong to a tenant, never see it. Its locks are taken on its own new
nodes only, so it is harmless on a database in use. The removal goes by the prefix, so what a
start-up stopped between the commit and the removal left is removed by the next one.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import neo4j
from neo4j.exceptions import ClientError

from ..audit.context import stored_skeleton
from ..audit.event import BLOCK, OUTCOMES, WRITE
from ..errors import Unavailable
from .audit import created_parts, linked_parts, time_forms
from .audit_form import placed_parts
from .audit_prefix import audited_params, audited_text, is_placed
from .coalesce import row_event
from .database import Database
from .neo4j_errors import map_errors

_WHEN = datetime(2000, 1, 1, tzinfo=UTC)
_ID = "00000000-0000-4000-8000-000000000000"
REHEARSAL_TENANT = "warm-up:"  # the rehearsal's tenant ids and chain ids start with it
FORGET = "health/forget_rehearsal"
NO_DATA = "warm-up: no data, no ciphertext"  # the rehearsal's tokens' `data_ct`

# A value of the type the repositories send for each parameter name, and of the size a first
# request's has: Neo4j also tells a string's or a list's size class apart (`size_class`), unless
# told not to. Most strings are ids, hashes or times (11-100 characters): a UUID's length.
SAMPLES: dict[str, Any] = {
    "actor": _ID, "after": "", "after_at": _ID, "after_id": "", "application_id": _ID,
    "application_name": _ID, "batch": 1, "before_at": _WHEN, "before_id": "~", "by": _ID,
    "chain": _ID,
    "chains": [_ID, 1],  # a chain's id as text and as an integer (audit/ids.py chain_forms)
    # The log statements' bounds on time, as integers and as DateTimes (audit.py time_forms).
    "times": time_forms(since=_WHEN, until=_WHEN, before=_WHEN),
    "checkpoints": [], "child_id": _ID, "claim": _ID, "content_type": _ID, "created": [],
    "created_by": _ID, "cutoff": _WHEN, "dedup": False, "deleted_by": _ID, "depth": 1,
    "direction": _ID, "event": {}, "expired_actor": _ID, "expired_reason": "expired",
    "expires_at": None, "fingerprint": _ID, "hash": _ID, "head_seq": 1, "high": None,
    "high_inclusive": False, "id": _ID, "ids": None, "index_digests": [], "into": _ID,
    "key": _ID,
    "key_id": _ID, "key_material": {}, "lease": 1.0, "limit": 1, "linked": [], "low": None,
    "low_inclusive": False, "max_links": 1, "max_nodes": 1, "merged_into": None,
    "meta_kvs": [], "modified_by": _ID, "name": _ID, "new": {}, "old": {}, "operation": None,
    "outcome": None, "parent_id": _ID, "parent_prefixes": [], "permissions": [],
    "prefixes": ["/"], "props": {}, "read_data_ct": _ID, "reason": "deleted",
    "request_hash": _ID,
    "response_ct": _ID, "revoked_by": _ID, "rows": [], "rules": _ID, "since": _WHEN,
    "status": 1, "tenant_id": _ID, "token_id": None, "token_ids": [], "transforms": _ID,
    "ttl": 1.0, "type": "token", "types": None,
    "until": _WHEN, "value": _ID, "versions": [], "prefix": REHEARSAL_TENANT,
    "changes": {}, "description": None, "destination_url": _ID, "header_allowlist": [],
    "busy": [], "containers": [], "delivered_ms": 1, "deliveries": [], "disable_after_ms": 1,
    "event_id": _ID, "events": [], "lease_ms": 1, "outcomes": [], "overlap_ms": 1,
    "retention_ms": 1, "room": {}, "room_default": 1, "scan": 1, "secret_ct": _ID, "url": _ID,
    # The audit prefix's (audited_params): no Idempotency-Key held.
    "audit": {}, "audit_at": 1, "idem_application": None, "idem_key": None,
    "idem_claim": None, "idem_written": None, "audit_refs": [], "audit_tenant_key": None,
    # The audit writer's blocks and write events written at their place (none, as most go).
    "blocks": [], "placed": [],
    # The log statements' ids as integers (audit/ids.py query_ids): a UUID's two halves.
    "tenant_key": 1, "tenant_rest": 1, "application_key": 1, "application_rest": 1,
    "token_key": None, "token_rest": None,
}
# Statements that send a parameter with another type than the name's usual one.
_NO_APPLICATION = {"application_id": None, "application_key": None, "application_rest": None}
OVERRIDES: dict[str, dict[str, Any]] = {
    "tokens/create": {"parent_id": None},
    # Rows of several items, as a tokenize sends them: Neo4j tells a list of maps from an
    # empty one (and, unless told not to, a list of one from one of up to ten).
    "tokens/create_many": {"rows": [{}, {}]},
    # Creates written together (repository/coalesce.py): the creates that waited while a lane
    # was busy, two to VAULTGRAPH_CREATE_BATCH_MAX (or one alone: MORE_FORMS).
    "tokens/create_batch": {"rows": [{}, {}]},
    # Gets read together, likewise: two to VAULTGRAPH_GET_BATCH_MAX (or one: MORE_FORMS).
    "tokens/get_batch": {"rows": [{}, {}]},
    "tokens/update": {"meta_kvs": [_ID]},  # a merge patch of metadata: an entry at least
    "tokens/list_by_type": {"types": []},
    "tokens/list_by_ids": {"ids": []},
    "proxies/call": {"ids": []},
    "audit/list": {**_NO_APPLICATION, "outcomes": list(OUTCOMES)},  # a seek per outcome
    "audit/list_by_token": {**_NO_APPLICATION, "token_id": _ID, "token_key": 1,
                            "token_rest": 1},
    "audit/list_by_operation": {**_NO_APPLICATION, "operation": "token:read"},
    "audit/list_by_outcome": {**_NO_APPLICATION, "outcome": "success"},
    # The audit writer's batch of events no statement stored (reads), and of writes' events.
    "audit/write_batch": {"created": [{}]},
    "audit/open_write_chain": {"until": 1},
    "audit/block_pins": {"until": 1},
    "audit/retire_write_chains": {"chains": [_ID], "before": 1},
    "audit/chain_events": {"after": 1},
    "audit/export": {"times": time_forms(since=_WHEN, until=_WHEN, after=_WHEN)},
    "audit/prune_leftovers": {"times": time_forms(cutoff=_WHEN, after=_WHEN)},
}
# Statements planned in more forms than one: each entry is planned too, over the samples.
MORE_FORMS: dict[str, list[dict[str, Any]]] = {
    # Alone, and as children of a caller's readable prefixes (a plain create sends none).
    "tokens/create_batch": [{"rows": [{}]}, {"parent_prefixes": ["/"]},
                            {"rows": [{}], "parent_prefixes": ["/"]}],
    "tokens/get_batch": [{"rows": [{}]}],
    "audit/write_batch": [{"created": [], "linked": [{}]},
                          # a block settling creates' events, alone or beside reads' events,
                          # and with a create's event written again at its place; and one
                          # for each of several chains of write events, as places held back
                          # for a settle wait go (services/audit_writer.py `pin`)
                          {"created": [], "blocks": [{}]}, {"blocks": [{}]},
                          {"created": [], "blocks": [{}], "placed": [{}]},
                          {"created": [], "blocks": [{}, {}]}, {"blocks": [{}, {}]},
                          {"created": [], "blocks": [{}, {}], "placed": [{}]}],
}
# Writes a request may send with its event stored complete at its place (PLACED_PREFIX): a
# create, a tokenize, an update, a delete and an unlink that declared how they end
# (services/tokens.py, services/bulk.py, services/graph.py), each planned in the forms its
# event takes: naming one token (held as a scalar, no AUDIT_REF: the samples) or several (an
# AUDIT_REF each: a child's create, a tokenize of more than one item, an unlink).
ONE_NAMED: dict[str, Any] = {}
SEVERAL_NAMED = {"audit_refs": [[1, 1], [1, 1]], "audit_tenant_key": 1}
PLACEABLE: dict[str, tuple[dict[str, Any], ...]] = {
    "tokens/create": (ONE_NAMED, SEVERAL_NAMED),
    "tokens/create_many": (ONE_NAMED, SEVERAL_NAMED),
    "tokens/update": (ONE_NAMED,),
    "tokens/delete": (ONE_NAMED,),
    "graph/unlink": (SEVERAL_NAMED,),
}

# Writes that store their requests' events themselves, a row each, and are never sent with the
# audit prefix: planned as they are only.
OWN_EVENTS = ("tokens/create_batch",)

# Not planned here: the schema (applied, not planned) and the search statement, which takes
# seconds of Neo4j's planning on a cold server: start-up plans it on its own connection
# meanwhile (SearchRepository.prepare, with parameters as a page sends them).
NOT_HERE = ("schema/", "search/")

# What one warm-up statement (a plan, the rehearsal) may take: not a request's budget. A cold or
# busy Neo4j can take longer than a request may wait to plan a statement, and it goes on planning
# after the client gives up, so a start-up that timed out and began again only added work: on a
# machine at load 12 a start-up retried for five minutes without turning ready.
PLANNING_TIMEOUT = 60.0


def budget(db: Database) -> float:
    return max(db.timeout, PLANNING_TIMEOUT)


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


def size_class(size: int) -> str:
    """The size class Neo4j tells a string's or a list's length by in its plan cache (unless
    told not to, `internal.cypher.use_parameter_size=false`): empty, exactly 1, up to 10, up to
    100, and so on by powers of ten."""
    if size <= 1:
        return str(size)
    bound = 10
    while size > bound:
        bound *= 10
    return f"<={bound}"


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
        return f"string/{size_class(len(value))}"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, (list, tuple)):
        # Neo4j also tells lists apart by their elements' type (strings, numbers, maps, mixed
        # or none: an empty list), not by their elements' sizes.
        kinds = {_kind(v).split("/")[0] for v in value}
        of = kinds.pop() if len(kinds) == 1 else ("any" if kinds else "nothing")
        return f"list/{size_class(len(value))}/{of}"
    if isinstance(value, datetime):
        return "datetime"
    return type(value).__name__


def signature(params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """A statement's parameters as Neo4j's plan cache tells them apart: name and type, and a
    string's or list's size class."""
    return tuple(sorted((name, _kind(value)) for name, value in params.items()))


@dataclass
class Prepared:
    """What the warm-up planned: (text, parameter types) of every form sent."""

    forms: set[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=set)
    statements: int = 0
    skipped: list[str] = field(default_factory=list)
    # What `rehearse` ran, in order, each having answered as it does for a request, and in
    # which form (text, parameter types): each one the warm-up planned, so the rehearsal runs
    # the very plan a first request gets (Neo4j builds the runnable plan on first use).
    rehearsed: list[str] = field(default_factory=list)
    rehearsed_forms: list[tuple[str, tuple[tuple[str, str], ...]]] = field(
        default_factory=list)
    rehearsal_tenant: str = ""
    rehearsal_ids: list[str] = field(default_factory=list)  # its tokens, events and chain
    removed: int = 0  # nodes the removal after the rehearsal found (its own, and leftovers)


async def prepare(db: Database, concurrency: int = 4) -> Prepared:
    """EXPLAIN every catalog statement (outside `schema/`) in the forms the service sends it,
    `concurrency` at a time. Raises `errors.Unavailable` when Neo4j cannot answer (start-up
    retries). A text Neo4j refuses as a syntax error is a part other statements are composed
    of, not a statement: it is skipped (and named in `Prepared.skipped`)."""
    prepared = Prepared()
    limit = asyncio.Semaphore(max(1, concurrency))

    async def explain(text: str, params: dict[str, Any]) -> str:
        async with limit, map_errors():
            async with asyncio.timeout(budget(db)), db.session() as session:
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
        for form in MORE_FORMS.get(name, []):
            await planned(text, {**sample_parameters(name, text), **form})
        # A write may carry the prefix (unless it is one the prefix cannot precede, such as
        # `CALL { … } IN TRANSACTIONS`, which is never sent with it).
        if kind in _WRITES and name not in OWN_EVENTS:
            audited = audited_text(text)
            await planned(audited, sample_parameters(name, audited))
            for named in PLACEABLE.get(name, ()):
                placed = audited_text(text, placed=True)
                await planned(placed, {**sample_parameters(name, placed), **named})

    names = [n for n in db.catalog.names() if not n.startswith(NOT_HERE)]
    outcomes = await asyncio.gather(*(one(name) for name in names), return_exceptions=True)
    failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
    if isinstance(failed, TimeoutError):
        raise Unavailable("Neo4j did not answer the warm-up in time.") from None
    if failed is not None:
        raise failed
    prepared.skipped.sort()
    return prepared


_PREFIXES = ["/"]


class RehearsalFailed(RuntimeError):
    """A rehearsed statement did not answer as it does for a request."""


class _Rehearsal:
    """The rehearsal's tenant, tokens and audit events (as the requests' own would be)."""

    def __init__(self, prepared: Prepared):
        self.tenant = prepared.rehearsal_tenant = REHEARSAL_TENANT + str(uuid.uuid4())
        self.parent, self.child = (str(uuid.uuid4()) for _ in range(2))
        self.chain = REHEARSAL_TENANT + str(uuid.uuid4())
        self.writes = REHEARSAL_TENANT + str(uuid.uuid4())  # its chain of write events
        self.ids = prepared.rehearsal_ids = [self.parent, self.child, self.chain, self.writes]
        self.settled: dict[str, Any] = {}  # the write event stored at its place
        # the events the writes stored: each whole, and as its statement stored it
        self.stored: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def event(self, operation: str, token_id: str) -> dict[str, Any]:
        """A request's event skeleton (`audit.context.AuditNote.skeleton`); its write stores it
        as `write` gives it."""
        made = {"id": str(uuid.uuid4()), "at": datetime.now(UTC), "operation": operation,
                "route": "/tokens", "trace_id": uuid.uuid4().hex, "tenant_id": self.tenant,
                "application_id": self.tenant, "key_id": self.tenant,
                "token_ids": [token_id], "client_ip": "127.0.0.1",
                "user_agent": "vaultgraph warm-up", "outcome": "success"}
        self.ids.append(made["id"])
        return made

    def write(self, operation: str, token_id: str) -> dict[str, Any]:
        """The event of a write, as its statement stores it (`stored_skeleton`); linked by the
        audit writer's batch."""
        made = self.event(operation, token_id)
        self.stored.append((made, stored := stored_skeleton(made)))
        return stored

    def placed(self, operation: str, token_id: str, seq: int = 1) -> dict[str, Any]:
        """The event of a create that declared how it ends, at number `seq` of the rehearsal's
        chain of write events (signed with no key: its MAC is a stand-in); the first is the
        one a block settles."""
        placed = {**self.event(operation, token_id), "status": 201, "transform": "mask",
                  "chain": self.writes, "seq": seq, "key_version": 1, "kind": WRITE,
                  "mac": "00" * 32}
        if seq == 1:
            self.settled = placed
        return placed

    def block(self, seq: int) -> dict[str, Any]:
        """A block at `seq` of the rehearsal's chain, settling its write event."""
        block = {"id": str(uuid.uuid4()), "at": datetime.now(UTC), "kind": BLOCK,
                 "settles": self.writes, "pins": [1], "pin_macs": [self.settled["mac"]],
                 "chain": self.chain, "seq": seq, "key_version": 1, "mac": "00" * 32}
        self.ids.append(block["id"])
        return block

    def token(self, token_id: str) -> dict[str, Any]:
        """A token's properties (services/tokens.py, `_props`), with no data: in its place a
        text as long as a ciphertext's size class (an update sends the one it read)."""
        return {"type": "token", "data_ct": NO_DATA, "mask_ct": None, "fingerprint": token_id,
                "fingerprint_expression": "{{ data | stringify }}", "containers": ["/"],
                "metadata": "{}", "search_indexes": [], "search_index_values": [],
                "deduplicate_token": False, "created_by": self.tenant}


async def rehearse(db: Database, prepared: Prepared) -> None:
    """Run the write path once, for real, in one transaction that is committed, then remove
    what it wrote (the module's docstring); what ran goes to `prepared.rehearsed`, how many
    nodes the removal found to `prepared.removed`. Raises `errors.Unavailable` when Neo4j
    cannot answer, `RehearsalFailed` when a statement answered otherwise than it does for a
    request. The removal runs even when the write path failed."""
    r = _Rehearsal(prepared)
    try:
        async with asyncio.timeout(budget(db)), map_errors(), db.session() as session:
            try:
                tx = await session.begin_transaction(timeout=budget(db))
                try:
                    await _write_path(db, tx, r, prepared)
                    await tx.commit()
                finally:
                    await tx.close()
            finally:
                result = await session.run(db.catalog.text(FORGET),
                                           {"prefix": REHEARSAL_TENANT})
                record = await result.single(strict=True)
                prepared.removed = record["removed"]
    except TimeoutError:
        raise Unavailable("Neo4j did not answer the warm-up in time.") from None


async def _write_path(db: Database, tx: neo4j.AsyncTransaction, r: _Rehearsal,
                      prepared: Prepared) -> None:
    async def run(name: str, audit: dict[str, Any] | None = None, answers: bool = True,
                  **params: Any) -> list[neo4j.Record]:
        text = db.catalog.text(name)
        if audit is not None:  # sent inside a request: with the audit prefix
            text, params = (audited_text(text, is_placed(audit)),
                            audited_params(params, audit))
        result = await tx.run(text, params)
        records = [record async for record in result]
        if bool(records) != answers:
            raise RehearsalFailed(name)
        prepared.rehearsed.append(name)
        prepared.rehearsed_forms.append((text, signature(params)))
        return records

    tenant, parent, child = r.tenant, r.parent, r.child
    # Every request's first statement: an API key's look-up (of a digest no key has).
    await run("auth/authenticate", answers=False, hash=hashlib.sha256(tenant.encode()).hexdigest())
    await run("audit/open_write_chain", answers=False, chain=r.writes, until=1)
    # The parent's event stored pending, the child's complete at its place.
    for token_id, audit in ((parent, r.write("token:create", parent)),
                            (child, r.placed("token:create", child))):
        await run("tokens/create", audit, tenant_id=tenant,
                  id=token_id, props=r.token(token_id), expires_at=None,
                  meta_kvs=[], index_digests=[], dedup=False, parent_id=None,
                  parent_prefixes=[], expired_actor="expiry-sweeper", expired_reason="expired")
    # Creates written together (repository/coalesce.py): two rows, each with its event at a
    # place of its own, created under the parent (a batch of children, the statement's every
    # branch; a batch of creates without one plans and runs the same text).
    together = [str(uuid.uuid4()) for _ in range(2)]
    r.ids.extend(together)
    await run("tokens/create_batch", expired_actor="expiry-sweeper", expired_reason="expired",
              parent_prefixes=_PREFIXES,
              rows=[{"index": i, "tenant_id": tenant, "id": token_id, "props": r.token(token_id),
                     "expires_at": None, "meta_kvs": [], "dedup": False, "index_digests": [],
                     "parent_id": parent,
                     **row_event(r.placed("token:create", token_id, seq=2 + i))}
                    for i, token_id in enumerate(together)])
    await run("tokens/get", tenant_id=tenant, id=parent, prefixes=_PREFIXES)
    # Gets read together (repository/coalesce.py): two rows.
    await run("tokens/get_batch", prefixes=_PREFIXES,
              rows=[{"index": i, "tenant_id": tenant, "id": token_id}
                    for i, token_id in enumerate(together)])
    # An update's event goes with its change, not with the read under its lock (the lock is
    # taken when the token changed since an update read it without, or to look for a
    # duplicate).
    await run("tokens/lock_for_update", tenant_id=tenant, id=child, prefixes=_PREFIXES)
    await run("tokens/update", r.write("token:update", child), tenant_id=tenant, id=child,
              prefixes=_PREFIXES, read_data_ct=r.token(child)["data_ct"],
              props={**r.token(child), "modified_by": tenant}, expires_at=None,
              meta_kvs=["warm-up\x1fyes"], index_digests=[])
    await run("graph/link", r.write("token:update", parent), tenant_id=tenant,
              parent_id=parent, child_id=child, prefixes=_PREFIXES, actor=tenant)
    await run("tokens/delete", r.write("token:delete", child), tenant_id=tenant, id=child,
              prefixes=_PREFIXES, actor=tenant, reason="deleted", merged_into=None)
    # The audit writer's batches, in the forms it sends most: a read's event created whole,
    # a write's event completed (one a batch), and a block settling the placed event, which is
    # written again at its place.
    read = {**r.event("token:read", parent), "status": 200}
    batches = [([created_parts(read)], [], [])] + [
        ([], [linked_parts({**e, "status": 200}, stored)], []) for e, stored in r.stored] + [
        ([], [], [r.settled])]
    for seq, (created, linked, placed) in enumerate(batches, start=1):
        [done] = await run("audit/write_batch", chain=r.chain, head_seq=seq, created=created,
                           linked=linked, blocks=[created_parts(r.block(seq))] if placed else [],
                           placed=[placed_parts(e) for e in placed])
        if not done["in_order"]:
            raise RehearsalFailed("audit/write_batch")
