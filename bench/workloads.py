"""The workloads: each is a pool of request items, how one item becomes an HTTP request for
the service, and how the same item runs on the bare driver (same catalog statement, parameters
and encryption work as the service's repository and service layers)."""

from __future__ import annotations

import asyncio
import functools
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import neo4j
import orjson
from neo4j import AsyncDriver

from vaultgraph.audit import context as audit_context
from vaultgraph.catalog import Catalog
from vaultgraph.repository.audit_prefix import (
    audited_params,
    audited_text,
    creates_with_change,
    is_placed,
)
from vaultgraph.repository.database import (
    NO_BOOKMARKS,
    Transaction,
    begin_with_first_statement,
    kept_sessions,
    retire_sessions,
)
from vaultgraph.repository.graph import GraphRepository
from vaultgraph.repository.search import SearchRepository
from vaultgraph.repository.tokens import Contended, NewToken, TokenFilter, TokenRepository
from vaultgraph.repository.webhooks import WebhookRepository
from vaultgraph.search.plan import compile
from vaultgraph.search.query import Limits, parse, with_values
from vaultgraph.services import expiry
from vaultgraph.services.tokens import meta_kvs
from vaultgraph.settings import Settings
from vaultgraph.tokens.merge_patch import merge_patch
from vaultgraph.tokens.stored import StoredToken

from . import audit_forms
from .dataset import (
    PER_CUSTOMER,
    REGIONS,
    Tenant,
    card_data,
    card_metadata,
    card_props,
    customer,
)

MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"
POOL = 20_000  # request items per workload; wrk and the bare clients cycle through them
TAKE = object()  # BareDriver._run's default: the request's event is taken there


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    content_type: str = ""
    body: bytes = b""


@dataclass
class Context:
    tenant: Tenant
    ids: list[str]               # loaded token ids
    catalog: Catalog
    driver: AsyncDriver
    database: str = "neo4j"
    counter: int = 10_000_000    # numbers for new cards, past the loaded ones
    prefixes: list[str] = field(default_factory=lambda: ["/"])  # the bench app's one rule
    audit: Any = None            # the bare side's AuditWriter: the same event writes as the service
    plans: dict | None = None    # set: the bare statements run under PROFILE (bench/plans.py)
    proxy_id: str = ""           # the proxy workload's proxy (to bench/destination.py)
    destination: str = ""        # its destination URL, which the bare side posts to directly
    session: Any = None          # the bare side's aiohttp session to the destination
    tx: Any = None               # set: the bare reads run in this transaction (bench/plans.py)
    outbox: Any = None           # webhook_create's bare deliveries (bench/outbox.py), woken
                                 # after each create
    write_form: Any = None       # set: a write's audit event stored another way than the
                                 # service's (bench/audit_forms.py), for bench/audit_ab.py
    # The bare statements' sessions, kept between statements as the service's Database keeps
    # its own (repository/database.py IdleSessions); `close` closes them.
    idle: dict = field(default_factory=kept_sessions)
    # Creates written together as the service's (repository/coalesce.py): its settings, which
    # the harness takes from the service's environment (bench/run.py `bare_settings`); the
    # service's defaults for a harness that does not.
    create_lanes: int = Settings.create_lanes
    create_batch_max: int = Settings.create_batch_max
    get_lanes: int = Settings.get_lanes  # and gets read together, as the service's
    get_batch_max: int = Settings.get_batch_max
    request_timeout: float = Settings.request_timeout  # a create's deadline, as a request's

    @property
    def principal(self) -> SimpleNamespace:
        """Who the bare side's audit events name: the bench application."""
        return SimpleNamespace(tenant_id=self.tenant.tenant_id,
                               application_id=self.tenant.app_id, key_id=self.tenant.app_id)

    def next_number(self) -> int:
        self.counter += 1
        return self.counter

    async def close(self) -> None:
        """The kept sessions (the driver, the audit writer and the HTTP session are the
        harness's)."""
        await retire_sessions(self.idle)

    # The bare side goes through the service's repositories for one reason: they are where
    # each statement's parameters are spelled, so the bare client sends exactly what the service
    # sends even while statements change. The repositories only map arguments to parameters;
    # `BareDriver` below replaces the service's Database with plain driver calls.
    @functools.cached_property
    def tokens(self) -> TokenRepository:
        # One for the context's life: its creates share lanes and are written together as
        # the service's are (repository/coalesce.py), in the same statements.
        return TokenRepository(BareDriver(self),  # type: ignore[arg-type]
                               create_lanes=self.create_lanes,
                               create_batch_max=self.create_batch_max,
                               get_lanes=self.get_lanes, get_batch_max=self.get_batch_max)

    @property
    def graph(self) -> GraphRepository:
        return GraphRepository(BareDriver(self))  # type: ignore[arg-type]

    @property
    def search(self) -> SearchRepository:
        return SearchRepository(BareDriver(self))  # type: ignore[arg-type]

    @property
    def webhooks(self) -> WebhookRepository:
        return WebhookRepository(BareDriver(self))  # type: ignore[arg-type]


class BareDriver:
    """The Database interface the repositories use, as bare `neo4j` driver calls."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.catalog = ctx.catalog

    # The fastest plain use of the driver for one statement: an auto-commit RUN+PULL, one
    # round trip (a managed `execute_query` adds a COMMIT round trip).
    async def read(self, name: str, /, **params) -> list:
        return await self._run(name, params, neo4j.READ_ACCESS)

    async def write(self, name: str, /, **params) -> list:
        return await self._run(name, params, neo4j.WRITE_ACCESS)

    async def write_unaudited(self, name: str, /, **params) -> list:
        """A write without a request's audit event (the outbox's claims and outcomes, as the
        service's sender writes them)."""
        return await self._run(name, params, neo4j.WRITE_ACCESS, audited=False)

    # What creates written together use (repository/coalesce.py), as the service's Database.
    async def write_event_with(self, name: str, params: dict, event: dict | None) -> list:
        return await self._run(name, params, neo4j.WRITE_ACCESS, event=event)

    def written(self, name: str, params: dict, audited: bool = True) -> None:
        if audited:
            audit_context.written()

    async def write_rows(self, name: str, params: dict, until: float) -> list:
        """Several requests' rows, each with its own event: the statement carries no one
        request's (the bare client has no deadline: `until` is not applied)."""
        return await self._run(name, params, neo4j.WRITE_ACCESS, audited=False)

    async def read_rows(self, name: str, params: dict, until: float) -> list:
        """Several requests' reads (repository/coalesce.py; `until` is not applied)."""
        return await self._run(name, params, neo4j.READ_ACCESS)

    def deadline_at(self) -> float:
        """A request's deadline, as the service's (`VAULTGRAPH_REQUEST_TIMEOUT` from now)."""
        return asyncio.get_running_loop().time() + self.ctx.request_timeout

    async def _run(self, name: str, params: dict, mode: str,
                   query: neo4j.Query | None = None, audited: bool = True,
                   event: Any = TAKE) -> list:
        """`event`: the request's event, taken (`audit_context.write_event`) here unless the
        caller took it already."""
        ctx = self.ctx
        text = query or ctx.catalog[name]
        if event is TAKE:
            event = (audit_context.write_event()
                     if audited and mode == neo4j.WRITE_ACCESS else None)
        if event is not None and ctx.write_form is not None:
            text, params = await ctx.write_form.statement(ctx, ctx.catalog.text(name), params,
                                                          event)
        elif event is not None:  # as the service's Database: the write creates its own event
            text, params = (audited_text(ctx.catalog.text(name), is_placed(event)),
                            audited_params(params, event))
        if ctx.plans is not None:
            text = neo4j.Query("PROFILE " + (text.text if isinstance(text, neo4j.Query)
                                             else text))
        if ctx.tx is not None:
            query = text.text if isinstance(text, neo4j.Query) else text
            return [record async for record in await ctx.tx.run(query, params)]
        idle = ctx.idle[mode]
        s = self._session(idle, mode)
        try:
            result = await s.run(text, params)
            records = [record async for record in result]
            if ctx.plans is not None:
                ctx.plans.setdefault(name, []).append(
                    (await result.consume()).profile)
        except BaseException as exc:
            await s.__aexit__(type(exc), exc, exc.__traceback__)  # as leaving `async with` does
            raise
        if not idle.give(s):
            await s.close()
        if event is not None and (records or not creates_with_change(ctx.catalog.text(name))):
            audit_context.written()
        return records

    def _session(self, idle, mode: str) -> neo4j.AsyncSession:
        """A session kept from an earlier statement or transaction, as the service's Database
        keeps them, else a new one: as the service's on one server, sending no bookmark, not
        even the session's own last."""
        return idle.take() or self.ctx.driver.session(
            database=self.ctx.database, default_access_mode=mode, bookmark_manager=NO_BOOKMARKS)

    async def transaction(self, work) -> Any:
        ctx = self.ctx
        last: list[Transaction] = []

        async def run(tx):  # as the service's Database: the event goes with a change
            last[:] = [Transaction(tx, ctx.catalog)]
            return await work(last[0])

        # A kept write session and BEGIN sent with the first statement, as the service's
        # Database runs its transactions.
        idle = ctx.idle[neo4j.WRITE_ACCESS]
        s = self._session(idle, neo4j.WRITE_ACCESS)
        try:
            with begin_with_first_statement(s):
                result = await s.execute_write(run)
        except BaseException as exc:
            await s.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        if not idle.give(s):
            await s.close()
        if last and last[0].event is not None:
            audit_context.written()
        return result


async def audited(ctx: Context, request: Request, work: Awaitable[None]) -> bool:
    """The bare side's share of the audit trail, the database work the service's audit
    middleware causes: a write's event that ends as its write declared (a create's, an
    update's) stored complete at its place by its own statement and settled by a block,
    another write's (an association's) created by its own statement and linked into the chain
    afterwards; any other event group-committed before the answer. Whether the event was
    handed over to be linked with no one waiting (`record_later`): the writer batches it at
    once, not a settle wait later as it does a settled write event."""
    note = audit_context.AuditNote(id=str(uuid.uuid4()), at=datetime.now(UTC),
                                   operation="token:read", route=f"{request.method} /tokens",
                                   trace_id=uuid.uuid4().hex, client_ip="127.0.0.1",
                                   user_agent="bench")
    note.principal = ctx.principal
    if ctx.write_form is None:  # a create's event placed, as the service's (not another form)
        note.placer = ctx.audit
    with ctx.audit.arriving() as arrival:  # as the audit middleware announces each request
        token = audit_context.current.set(note)
        held = audit_forms.ARRIVAL.set(arrival)
        try:
            await work
        finally:
            audit_forms.ARRIVAL.reset(held)
            audit_context.current.reset(token)
        event = {**note.skeleton(), "status": 200,
                 "transform": "mask" if note.transforms else None}
        if note.persisted and ctx.write_form is not None and not ctx.write_form.linked_after:
            return False  # handed over before the write (bench/audit_forms.py `intent`)
        if note.placed is not None and note.persisted:  # ended as it declared: settled
            ctx.audit.pin(note.placed, arrival)
        elif note.persisted:
            ctx.audit.record_later(event, arrival, stored=note.stored)
            return True
        else:
            await ctx.audit.record(event, arrival, stored=note.stored)
        return False


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    items: Callable[[Context, random.Random], list[Any]]
    http: Callable[[Any], Request]
    bare: Callable[[Context, Any], Awaitable[None]] | None
    route_probe: bool = False   # skip when the route answers 404/405 (not built yet)
    items_per_request: int = 1  # tokens a request handles (bulk workloads report tokens/s)
    # The most CPU the service may add over the bare client per request (docs/performance.md):
    # a single token, a 50-item page, a 10-item batch.
    added_cpu_target_ms: float = 0.30
    # Measured in a phase of its own, with a subscribed webhook whose deliveries each side
    # makes (bench/run.py `Bench.outbox_workload`, bench/outbox.py).
    outbox: bool = False


# -- shared pieces --------------------------------------------------------------------------

def _new_card(ctx: Context) -> dict:
    n = ctx.next_number()
    return {"type": "card", "data": card_data(n), "metadata": card_metadata(n)}


def _props(ctx: Context, token_id: str, data: dict, metadata: dict) -> dict:
    return card_props(ctx.tenant.keys, token_id, data, metadata)


def _decrypt(ctx: Context, node: StoredToken) -> None:
    audit_context.note_tokens([node.id], "mask")  # as the service notes what it renders
    keys = ctx.tenant.keys
    for name in ("data", "mask"):
        if node.ciphertext(name):
            keys.decrypt_json(node.ciphertext(name), token_id=node.id, field=name)


async def _bare_create(ctx: Context, body: dict, parent_id: str | None = None) -> None:
    token_id = str(uuid.uuid4())
    audit_context.note_tokens([token_id] + ([parent_id] if parent_id else []))
    audit_context.expect(201, "mask")  # as the service declares how a create ends
    props = _props(ctx, token_id, body["data"], body["metadata"])
    props["created_by"] = ctx.tenant.app_id
    created = await ctx.tokens.create(
        tenant_id=ctx.tenant.tenant_id, id=token_id, props=props, expires_at=None,
        meta_kvs=meta_kvs(body["metadata"]), index_digests=[], dedup=False,
        parent_id=parent_id,
        parent_prefixes=ctx.prefixes if parent_id else None,
        expired=(expiry.ACTOR, expiry.REASON))
    if created is None:
        raise LookupError("parent not found")


# -- (a) create ------------------------------------------------------------------------------

def _create_items(ctx, rng):
    return [_new_card(ctx) for _ in range(POOL)]


def _create_http(body):
    return Request("POST", "/tokens", JSON, orjson.dumps(body))


# -- (b) get (masked) ------------------------------------------------------------------------

def _ids(ctx, rng):
    return [rng.choice(ctx.ids) for _ in range(POOL)]


# The workloads that add links (create child, create association) add them only among the
# second half of the loaded customers, and the graph searches walk only the first half's, whose
# graph stays as loaded: a customer's first token the parent of its other 49. Links at random
# among all the tokens grew what a search walks with every window before it (`ancestor:X`'s
# Neo4j CPU a request: 4.3-8.5 ms in runs of one round, about 12 ms with two, 25 ms with three;
# 2.8 ms with the split), so the search's figure depended on the run's length.

def _walked(ctx) -> list[str]:
    """The tokens of the customers the graph searches walk: the first half (at least one)."""
    customers = max(1, len(ctx.ids) // PER_CUSTOMER // 2)
    return ctx.ids[:customers * PER_CUSTOMER]


def _linked(ctx) -> list[str]:
    """The tokens the link-adding workloads link: the other customers' (all, when there are
    too few customers to split)."""
    return ctx.ids[len(_walked(ctx)):] or ctx.ids


async def _bare_get(ctx, token_id):
    node = await ctx.tokens.get(tenant_id=ctx.tenant.tenant_id, id=token_id,
                                prefixes=ctx.prefixes)
    if node is None:
        raise LookupError(token_id)
    _decrypt(ctx, node)


# -- (c) list by metadata, page of 50 --------------------------------------------------------

def _customers(ctx, rng):
    customers = max(1, len(ctx.ids) // PER_CUSTOMER)
    return [customer(rng.randrange(customers)) for _ in range(POOL)]


def _list_http(cus):
    return Request("GET", f"/tokens?metadata.customer_id={cus}&size=50")


async def _bare_list(ctx, cus):
    nodes = await ctx.tokens.page(
        tenant_id=ctx.tenant.tenant_id, prefixes=ctx.prefixes, after="", limit=51,
        where=TokenFilter(meta_kvs=tuple(meta_kvs({"customer_id": cus}))))
    for node in nodes[:50]:
        _decrypt(ctx, node)


# -- (d) create child ------------------------------------------------------------------------

def _child_items(ctx, rng):
    parents = _linked(ctx)
    return [(rng.choice(parents), _new_card(ctx)) for _ in range(POOL)]


def _child_http(item):
    parent, body = item
    return Request("POST", f"/tokens/{parent}/children", JSON, orjson.dumps(body))


async def _bare_child(ctx, item):
    parent, body = item
    await _bare_create(ctx, body, parent_id=parent)


# -- (e) update (merge-patch) ----------------------------------------------------------------

def _update_items(ctx, rng):
    return [(rng.choice(ctx.ids), {"data": {"expiration_month": rng.randint(1, 12)},
                                   "metadata": {"region": rng.choice(REGIONS)}})
            for _ in range(POOL)]


def _update_http(item):
    token_id, patch = item
    return Request("PATCH", f"/tokens/{token_id}", MERGE_PATCH, orjson.dumps(patch))


async def _bare_update(ctx, item):
    token_id, patch = item
    audit_context.note_tokens([token_id])
    keys, tenant_id = ctx.tenant.keys, ctx.tenant.tenant_id

    repo = ctx.tokens

    async def apply(uow, node):
        if node is None:
            raise LookupError(token_id)
        data = merge_patch(keys.decrypt_json(node.data_ct, token_id=token_id, field="data"),
                           patch["data"])
        metadata = merge_patch(dict(node.metadata or {}), patch["metadata"])
        props = _props(ctx, token_id, data, metadata)
        props["modified_by"] = ctx.tenant.app_id
        audit_context.expect(200, "mask")  # as the service declares how an update ends
        await uow.update(tenant_id=tenant_id, id=token_id, prefixes=ctx.prefixes, read=node,
                         props=props, expires_at=None, meta_kvs=meta_kvs(metadata),
                         index_digests=[])

    # As the service updates: read, then write only a token still as read; under the
    # token's lock, in a transaction, when it changed meanwhile.
    try:
        await apply(repo.unlocked(), await repo.get(tenant_id=tenant_id, id=token_id,
                                                    prefixes=ctx.prefixes))
    except Contended:
        async def work(uow):
            await apply(uow, await uow.lock(tenant_id=tenant_id, id=token_id,
                                            prefixes=ctx.prefixes))

        await repo.unit_of_work(work)


# -- (f) create association ------------------------------------------------------------------

def _pairs(ctx, rng):
    out, linked = [], _linked(ctx)
    for _ in range(POOL):
        parent, child = rng.sample(linked, 2)
        out.append((parent, child))
    return out


def _associate_http(item):
    parent, child = item
    return Request("POST", f"/tokens/{parent}/children/{child}")


async def _bare_associate(ctx, item):
    parent, child = item
    audit_context.note_tokens([parent, child])
    link = await ctx.graph.link(tenant_id=ctx.tenant.tenant_id, parent_id=parent,
                                child_id=child, prefixes=ctx.prefixes)
    if link is None:
        raise LookupError(item)


# -- (g) search: a metadata term and a descendant term, page of 50 ---------------------------

def _search_http(query: str) -> Request:
    return Request("POST", "/tokens/search", JSON,
                   orjson.dumps({"query": query, "size": 50}))


async def _bare_search(ctx, query: str) -> None:
    # The query parsed, put in stored form (metadata as key U+001F value) and planned as the
    # service does; the repository runs the one search statement with it.
    plan = compile(with_values(parse(query, Limits()), lambda term: meta_kvs(
        {term.key: term.value})[0] if term.field == "metadata" else term.value))
    hits = await ctx.search.page(tenant_id=ctx.tenant.tenant_id, prefixes=ctx.prefixes,
                                 plan=plan, after=None, limit=51)
    for hit in hits[:50]:
        _decrypt(ctx, hit.token)


def _search_metadata_items(ctx, rng):
    return [f"metadata.customer_id:{cus}" for cus in _customers(ctx, rng)]


def _search_descendant_items(ctx, rng):
    # `descendant:X` finds X's ancestors: a card's is its customer's first token, which the
    # loader made the parent of the customer's other tokens ("whose card is this?").
    cards = [token_id for i, token_id in enumerate(_walked(ctx)) if i % PER_CUSTOMER]
    return [f"descendant:{rng.choice(cards)}" for _ in range(POOL)]


def _search_ancestor_items(ctx, rng):
    # `ancestor:X` finds X's descendants: all cards under one customer (a page of 49).
    roots = _walked(ctx)[::PER_CUSTOMER]
    return [f"ancestor:{rng.choice(roots)}" for _ in range(POOL)]


# -- (g) tokenize, batches of BATCH cards; (h) detokenize, BATCH tokens a payload ----------------

BATCH = 10


def _tokenize_items(ctx, rng):
    return [[_new_card(ctx) for _ in range(BATCH)] for _ in range(POOL // BATCH)]


def _tokenize_http(batch):
    return Request("POST", "/tokenize", JSON, orjson.dumps(batch))


async def _bare_tokenize(ctx, batch):
    rows = []
    for index, body in enumerate(batch):
        token_id = str(uuid.uuid4())
        props = _props(ctx, token_id, body["data"], body["metadata"])
        props["created_by"] = ctx.tenant.app_id
        rows.append(NewToken(index, token_id, props, None, meta_kvs(body["metadata"]), False,
                             []))
    # The service names every token of the batch in the write's audit event (one AUDIT_REF
    # each in the store): the bare side's event must name them too.
    audit_context.note_tokens([row.id for row in rows])
    audit_context.expect(200, *["mask"] * len(rows))  # as the service declares a tokenize's end
    created = await ctx.tokens.create_many(tenant_id=ctx.tenant.tenant_id, rows=rows,
                                           expired=(expiry.ACTOR, expiry.REASON))
    if len(created) != len(rows) or None in created.values():
        raise LookupError("not every token was created")


def _detokenize_items(ctx, rng):
    return [{f"field{i}": rng.choice(ctx.ids) for i in range(BATCH)} for _ in range(POOL)]


def _detokenize_http(fields):
    payload = {name: "{{ " + token_id + " }}" for name, token_id in fields.items()}
    return Request("POST", "/detokenize", JSON, orjson.dumps(payload))


async def _bare_detokenize(ctx, fields):
    ids = tuple(dict.fromkeys(fields.values()))
    nodes = await ctx.tokens.page(tenant_id=ctx.tenant.tenant_id, prefixes=ctx.prefixes,
                                  after="", limit=len(ids), where=TokenFilter(ids=ids))
    if len(nodes) != len(ids):
        raise LookupError("a token was not found")
    for node in nodes:
        _decrypt(ctx, node)


# -- (i) proxy: one token a call, through a proxy to a local destination ---------------------

def _proxy_items(ctx, rng):
    return [(ctx.proxy_id, rng.choice(ctx.ids)) for _ in range(POOL)]


def _proxy_body(card: Any) -> dict:
    return {"amount": 1250, "currency": "eur", "card": card}


def _proxy_http(item):
    proxy_id, token_id = item
    return Request("POST", f"/proxy/{proxy_id}/charges", JSON,
                   orjson.dumps(_proxy_body("{{ " + token_id + " }}")))


async def _bare_proxy(ctx, item):
    """What a caller that may read the data does itself: read and decrypt the token, post it."""
    _, token_id = item
    nodes = await ctx.tokens.page(tenant_id=ctx.tenant.tenant_id, prefixes=ctx.prefixes,
                                  after="", limit=1, where=TokenFilter(ids=(token_id,)))
    if not nodes:
        raise LookupError("the token was not found")
    audit_context.note_tokens([token_id])
    data = ctx.tenant.keys.decrypt_json(nodes[0].ciphertext("data"), token_id=token_id,
                                        field="data")
    async with ctx.session.post(ctx.destination + "/charges",
                                data=orjson.dumps(_proxy_body(data)),
                                headers={"Content-Type": JSON}) as resp:
        await resp.read()
        if resp.status != 200:
            raise LookupError(f"the destination answered {resp.status}")


# -- (j) create with one subscribed webhook: the outbox write and the delivery ---------------

async def _bare_webhook_create(ctx, body):
    """A create (its statement writes the delivery), then the bare deliveries woken, as the
    service's sender is by its process's writes."""
    await _bare_create(ctx, body)
    if ctx.outbox is not None:
        ctx.outbox.wake(ctx.tenant.tenant_id)


# Not one of the table's workloads: a public route with no database work, served through the
# whole middleware chain, on the service alone (it has no bare side). What the service spends
# on it a request is the HTTP floor every route pays (bench/run.py `Bench.floor`).
FLOOR = Workload("floor", "GET /health, a public route with no database work",
                 lambda ctx, rng: [None], lambda _: Request("GET", "/health"), None)

PAGE_TARGET = 0.60   # ms the service may add for a page of 50
BATCH_TARGET = 0.80  # ms the service may add for a batch of 10

WORKLOADS = (
    Workload("create", "create token (card + metadata)", _create_items, _create_http,
             lambda ctx, body: _bare_create(ctx, body)),
    Workload("get", "get token (masked)", _ids,
             lambda token_id: Request("GET", f"/tokens/{token_id}"), _bare_get),
    Workload("create_child", "create child token", _child_items, _child_http, _bare_child,
             route_probe=True),
    Workload("update", "update (merge-patch)", _update_items, _update_http, _bare_update),
    Workload("associate", "create association", _pairs, _associate_http, _bare_associate,
             route_probe=True),
    Workload("list", "list by metadata (page of 50)", _customers, _list_http, _bare_list,
             added_cpu_target_ms=PAGE_TARGET),
    Workload("search_metadata", "search metadata term (page of 50)", _search_metadata_items,
             _search_http, _bare_search, route_probe=True, added_cpu_target_ms=PAGE_TARGET),
    Workload("search_descendant", "search descendant term (a card's customer)",
             _search_descendant_items, _search_http, _bare_search, route_probe=True),
    Workload("search_ancestor", "search ancestor term (a customer's 49 cards, page of 50)",
             _search_ancestor_items, _search_http, _bare_search, route_probe=True,
             added_cpu_target_ms=PAGE_TARGET),
    Workload("tokenize", f"tokenize (batches of {BATCH} cards)", _tokenize_items,
             _tokenize_http, _bare_tokenize, route_probe=True, items_per_request=BATCH,
             added_cpu_target_ms=BATCH_TARGET),
    Workload("detokenize", f"detokenize ({BATCH} tokens a payload, masked)", _detokenize_items,
             _detokenize_http, _bare_detokenize, route_probe=True, items_per_request=BATCH,
             added_cpu_target_ms=BATCH_TARGET),
    Workload("proxy", "proxy call (one card a call, to a local destination)", _proxy_items,
             _proxy_http, _bare_proxy, route_probe=True),
    Workload("webhook_create", "create token, one subscribed webhook (delivered)",
             _create_items, _create_http, _bare_webhook_create, outbox=True),
)
