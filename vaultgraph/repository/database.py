"""The Neo4j edge: one driver per process, named catalog statements, driver errors mapped.

A request's single statement runs as an auto-commit transaction: RUN and PULL go out together,
so it costs one Bolt round trip (a managed transaction adds a COMMIT round trip, which measured
at half the throughput here; its BEGIN goes out with its first statement). Reads are routed as
reads. The session a statement or a managed transaction runs in is kept for the next one
(`IdleSessions`): opening a session builds its configuration and leaves its objects in
reference cycles that only the cyclic collector frees. A statement that fails with a transient
error (deadlock, lock timeout) was rolled back and is retried here; several statements that
must commit together run in a managed transaction (`transaction`), which the driver retries,
so its work function is idempotent.

Causal consistency (docs/operations.md, "Scale-out"): on a cluster, every session of the process,
and the schema's `execute_query`, share the driver's one bookmark manager, so every statement starts
after the last commit this process saw: a read routed to a follower or read replica waits until that
member has applied this process's earlier writes (a client's read after its own write through the
same replica sees it). Another replica's writes carry no bookmark here: with `read_routing="write"`
(VAULTGRAPH_NEO4J_READ_ROUTING) reads go to the leader too, which sees every committed write
whichever replica made it; otherwise a load balancer keeps a client on one replica (sticky
sessions).

A Community server is always one server (Community has no clustering), where a statement sees
every write committed before it starts: bookmarks guard nothing there and still cost a little
(the manager sends every bookmark of the sessions that overlapped the last ones with the next
statement: 6-8 a create in the benchmark; docs/adr/0002-no-bookmarks-on-one-server.md). So
once the schema is applied the process learns the server's edition and, on Community, drops the
manager. Any other server keeps it, whatever the URI's scheme: an Enterprise server reached by
`bolt://` may still forward to other members (remote aliases, composite databases).

Only repositories use this module.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
import importlib
import logging
import socket
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

import neo4j
from neo4j import AsyncDriver, AsyncManagedTransaction
from neo4j.exceptions import ClientError, ServiceUnavailable, TransientError

from .. import metrics
from ..audit import context as audit_context
from ..catalog import Catalog
from ..deadline import deadline, spending, timeout_at
from .audit_prefix import audited_params, audited_text, creates_with_change, is_placed
from .neo4j_errors import map_errors, timed_out

log = logging.getLogger(__name__)
T = TypeVar("T")

# The driver's Bolt protocol modules: each writes a debug line for every RUN message.
_BOLT_MODULES = tuple(f"neo4j._{kind}.io._bolt._bolt{v}" for kind in ("async", "sync")
                      for v in (3, 4, 5, 6))


def _quiet_run_debug_line() -> None:
    """The driver builds its `C: RUN` debug line, `" ".join(map(repr, (query, parameters,
    extra)))`, before `log.debug` decides to drop it: every statement's parameters (an audit
    batch's events, a create's ciphertexts and digests) are turned into text and thrown away,
    6 % of the instructions of a get (bench/hotpath_ir.py). In those modules `repr` serves that
    line only; it becomes one that gives the real text while the module's logger is enabled for
    DEBUG (the line is written as before) and an empty text otherwise (the line is dropped
    anyway). A module laid out otherwise (no `log`, a `repr` of its own) is left as it is."""
    for name in _BOLT_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        logger = getattr(module, "log", None)
        if not isinstance(logger, logging.Logger) or "repr" in vars(module):
            continue

        def debug_only_repr(value: object, _logger: logging.Logger = logger) -> str:
            return builtins.repr(value) if _logger.isEnabledFor(logging.DEBUG) else ""

        module.repr = debug_only_repr  # type: ignore[attr-defined]


_quiet_run_debug_line()

DEFAULT_TIMEOUT = 10.0
# VAULTGRAPH_NEO4J_READ_ROUTING: where reads go on a cluster (the driver's access modes).
READ_ROUTINGS = {"read": neo4j.READ_ACCESS, "write": neo4j.WRITE_ACCESS}


# What a connection attempt meets when nothing listens at the server's address, or no such
# address exists: refused, no route to the host or its network, a name no resolver knows.
_NOTHING_THERE = frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH})
# A name no resolver knows, or none could be asked (no DNS where the command runs): either
# way no retry within the command's seconds finds the server.
_NO_SUCH_NAME = frozenset({socket.EAI_NONAME, socket.EAI_AGAIN})


def nothing_listens(exc: BaseException) -> bool:
    """Whether a failed connection (`ServiceUnavailable`) failed only because nothing listens:
    every first cause, through the driver's chains and groups (one entry per router), is a
    refusal, an unreachable host or network, or an unknown name. A timeout or any other cause
    (a server that accepted and is slow to answer, a restart under way) is not."""
    pending, leaves = [exc], []
    while pending:
        error = pending.pop()
        if isinstance(error, BaseExceptionGroup):
            pending.extend(error.exceptions)
        elif error.__cause__ is not None:
            pending.append(error.__cause__)
        else:
            leaves.append(error)
    return bool(leaves) and all(
        (error.errno in _NO_SUCH_NAME) if isinstance(error, socket.gaierror)
        else isinstance(error, OSError) and error.errno in _NOTHING_THERE
        for error in leaves)


def _server_timeout(seconds: float) -> float:
    """Neo4j's own timeout for a transaction given `seconds` of the budget: it ends the
    transaction server-side when the caller has stopped waiting (at least 1 ms, its unit)."""
    return max(seconds, 0.001)


def _bounded(query: neo4j.Query, seconds: float) -> neo4j.Query:
    """`query` with Neo4j's transaction timeout set to what is left of the budget: work the
    service no longer waits for does not go on (or commit) after its answer was a 503."""
    return neo4j.Query(query.text, timeout=_server_timeout(seconds))


class Database:
    def __init__(self, driver: AsyncDriver, catalog: Catalog, database: str,
                 timeout: float = DEFAULT_TIMEOUT, read_routing: str = "read"):
        self.driver = driver
        self.catalog = catalog
        self.database = database
        self.timeout = timeout
        # One per driver: the same manager `driver.execute_query` uses by default; None once
        # the server is known to be Community (the module's docstring).
        self.bookmarks: neo4j.api.AsyncBookmarkManager | None = (
            driver.execute_query_bookmark_manager)
        self.read_access = READ_ROUTINGS[read_routing]
        self.schema_applied = False
        # Sessions between statements, one set per access mode (`_statement`).
        self._idle = kept_sessions(self.bookmarks)
        self._audited_queries: dict[str, neo4j.Query] = {}
        self._placed_queries: dict[str, neo4j.Query] = {}
        self._events_with_change = frozenset(
            name for name in (catalog.names() if catalog is not None else ())
            if creates_with_change(catalog.text(name)))
        self._after_write: list[Callable[[str, dict[str, Any]], None]] = []

    @property
    def reads_may_lag(self) -> bool:
        """Whether a read may miss a write made through another replica: reads go to any
        member of a cluster (not on Community, a single server, nor with reads routed to the
        leader)."""
        return self.read_access == neo4j.READ_ACCESS and self.bookmarks is not None

    def after_write(self, listener: Callable[[str, dict[str, Any]], None]) -> None:
        """Call `listener(name, params)` for each statement of `write` or `transaction` once it
        has committed (the webhook sender is woken so: it sends the change's event at once)."""
        self._after_write.append(listener)

    @classmethod
    def connect(cls, uri: str, user: str, password: str, catalog: Catalog, database: str,
                pool_size: int = 100, *, timeout: float = DEFAULT_TIMEOUT,
                acquire_timeout: float = 2.0, connect_timeout: float = 2.0,
                read_routing: str = "read") -> Database:
        """`timeout`: the longest a request's database work may take, retries included (its
        deadline); `acquire_timeout`: the longest a statement waits for a pooled connection
        (503 past it, never a hang); `connect_timeout`: for opening one; `read_routing`:
        "read" (reads may go to any member that has this process's writes) or "write"
        (reads go to the leader too)."""
        driver = neo4j.AsyncGraphDatabase.driver(
            uri, auth=(user, password), max_connection_pool_size=pool_size,
            connection_acquisition_timeout=acquire_timeout, connection_timeout=connect_timeout,
            max_transaction_retry_time=timeout,
            # Planner notifications (e.g. "property does not exist yet") are for development;
            # the server need not compute or send them.
            notifications_min_severity="OFF",
        )
        return cls(driver, catalog, database, timeout, read_routing)

    def _deadline(self, budgeted: bool = True) -> float:
        budget = deadline.get() if budgeted else None
        seconds = budget.remaining if budget is not None else self.timeout
        return asyncio.get_running_loop().time() + seconds

    async def close(self) -> None:
        await retire_sessions(self._idle)
        await self.driver.close()

    def session(self, mode: str = neo4j.WRITE_ACCESS) -> neo4j.AsyncSession:
        """Every session this process opens: causally chained through the driver's bookmark
        manager where there may be more than one server (see the module's docstring); on one
        server, sending no bookmark at all (`NO_BOOKMARKS`)."""
        manager = NO_BOOKMARKS if self.bookmarks is None else self.bookmarks
        return self.driver.session(database=self.database, default_access_mode=mode,
                                   bookmark_manager=manager)

    async def read(self, name: str, /, **params: Any) -> list[neo4j.Record]:
        return await self._statement(name, params, self.read_access)

    async def write(self, name: str, /, **params: Any) -> list[neo4j.Record]:
        """One write statement; inside a request it also creates the request's audit event in
        the same transaction (audited_text), so the change and its event commit together."""
        return await self.write_event_with(name, params, audit_context.write_event())

    async def write_event_with(self, name: str, params: dict[str, Any],
                               event: dict[str, Any] | None) -> list[neo4j.Record]:
        """`write` with the request's event already taken (`audit_context.write_event`)."""
        if event is None:
            records = await self._statement(name, params, neo4j.WRITE_ACCESS)
            self.written(name, params, audited=False)
        else:
            records = await self._statement(name, audited_params(params, event),
                                            neo4j.WRITE_ACCESS,
                                            query=self._audited(name, is_placed(event)))
            # A statement that creates its event only with its change stored none if it
            # changed nothing: the request's next write sends it (`creates_with_change`).
            self.written(name, params,
                         audited=bool(records) or name not in self._events_with_change)
        return records

    def written(self, name: str, params: dict[str, Any], audited: bool = True) -> None:
        """Statement `name` (`params`) committed, with the request's event when `audited`."""
        if audited:
            audit_context.written()
        for listener in self._after_write:
            listener(name, params)

    async def write_rows(self, name: str, params: dict[str, Any],
                         until: float) -> list[neo4j.Record]:
        """One write statement that belongs to no one request (several requests' rows, each
        with its own event: repository/coalesce.py), bounded by `until` on the loop's clock."""
        return await self._statement(name, params, neo4j.WRITE_ACCESS, until=until)

    async def read_rows(self, name: str, params: dict[str, Any],
                        until: float) -> list[neo4j.Record]:
        """One read statement that belongs to no one request (several requests' rows:
        repository/coalesce.py), bounded by `until` on the loop's clock."""
        return await self._statement(name, params, self.read_access, until=until)

    def deadline_at(self) -> float:
        """When the current request's database time runs out, on the loop's clock."""
        return self._deadline()

    async def write_unaudited(self, name: str, /, **params: Any) -> list[neo4j.Record]:
        """One write statement without the request's audit event: for bookkeeping of the HTTP
        exchange itself (idempotency entries), never for a change to tenant data. Its own
        `timeout`, outside the request's database budget: keeping an answer must not fail
        because the change it answers used the budget up."""
        return await self._statement(name, params, neo4j.WRITE_ACCESS, budgeted=False)

    def _audited(self, name: str, placed: bool = False) -> neo4j.Query:
        queries = self._placed_queries if placed else self._audited_queries
        query = queries.get(name)
        if query is None:
            query = queries[name] = neo4j.Query(audited_text(self.catalog.text(name), placed))
        return query

    async def _statement(self, name: str, params: dict, mode: str,
                         query: neo4j.Query | None = None, budgeted: bool = True,
                         until: float | None = None) -> list[neo4j.Record]:
        """Transient errors (the statement was rolled back) are retried with backoff for as
        long as the request's deadline (or `until`, unbudgeted) allows; past it the answer is a
        503."""
        query = query or self.catalog[name]
        loop = asyncio.get_running_loop()
        if until is not None:
            budgeted = False
        else:
            until = self._deadline(budgeted)
        # What `spending` and `_in_use` do, inline: this runs for every statement, and the two
        # context managers cost a get 0.6 % more instructions (`bench.hotpath_ir`, 2026-12-01).
        budget = deadline.get() if budgeted else None
        started = loop.time()
        in_use = metrics.NEO4J_SESSIONS_IN_USE
        attempt = 0
        try:
            async with map_errors():
                while True:
                    try:
                        async with timeout_at(until):
                            idle, manager = self._idle[mode], self.bookmarks
                            if idle.manager is not manager:  # learnt or set since
                                await idle.close(manager)
                            session = idle.take()
                            if session is None:
                                session = self.session(mode)
                            in_use.inc()
                            try:
                                result = await session.run(
                                    _bounded(query, until - loop.time()), params)
                                records = [record async for record in result]
                            except BaseException as exc:
                                # Never given back after a failure: what leaving the session's
                                # `async with` does (a cancelled one's connection is dropped).
                                await session.__aexit__(type(exc), exc, exc.__traceback__)
                                raise
                            finally:
                                in_use.dec()
                            if idle.manager is not manager or not idle.give(session):
                                await session.close()
                            return records
                    except TimeoutError:
                        raise timed_out() from None
                    except TransientError:
                        pause = min(0.01 * 2**attempt, 0.5)
                        attempt += 1
                        if loop.time() + pause >= until:
                            raise
                        metrics.NEO4J_RETRIES.labels("statement").inc()
                        await asyncio.sleep(pause)
        finally:
            if budget is not None:
                budget.remaining -= loop.time() - started

    async def transaction(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        """Several statements in one managed write transaction (one commit); the driver may
        retry `work`, so it must be idempotent. Inside a request, the request's audit event
        goes with the first statement that may change data (`Transaction.run`)."""
        attempts = 0
        last: list[Transaction] = []

        async def run(tx: AsyncManagedTransaction) -> T:
            nonlocal attempts
            attempts += 1
            if attempts > 1:  # the driver retries the work after a transient error
                metrics.NEO4J_RETRIES.labels("transaction").inc()
            last[:] = [Transaction(tx, self.catalog)]
            return await work(last[0])

        until = self._deadline()
        try:
            with spending(), _in_use():
                async with timeout_at(until), map_errors():
                    # A kept session, as a statement takes one (`_statement`), given back
                    # once its transaction has ended and never after a failure.
                    idle, manager = self._idle[neo4j.WRITE_ACCESS], self.bookmarks
                    if idle.manager is not manager:  # learnt or set since
                        await idle.close(manager)
                    session = idle.take() or self.session()
                    left = until - asyncio.get_running_loop().time()
                    try:
                        with begin_with_first_statement(session):
                            result = await session.execute_write(
                                neo4j.unit_of_work(timeout=_server_timeout(left))(run))
                    except BaseException as exc:
                        await session.__aexit__(type(exc), exc, exc.__traceback__)
                        raise
                    if idle.manager is not manager or not idle.give(session):
                        await session.close()
        except TimeoutError:
            raise timed_out() from None
        if last and last[0].event is not None:
            audit_context.written()
        for name, params in last[0].ran if last else ():
            for listener in self._after_write:
                listener(name, params)
        return result

    async def run_autocommit(self, name: str, /, **params: Any) -> list[neo4j.Record]:
        """One auto-commit write statement, never retried by the driver.

        For statements that manage their own transactions (`CALL { … } IN TRANSACTIONS`), which
        Neo4j refuses inside an explicit or managed transaction.
        """
        with _in_use():
            async with map_errors(), self.session() as session:
                result = await session.run(self.catalog[name], params)
                return [record async for record in result]

    async def _learn_edition(self) -> None:
        try:
            records, _, _ = await self.driver.execute_query(
                self.catalog["health/edition"], database_=self.database,
                bookmark_manager_=self.bookmarks, routing_=neo4j.RoutingControl.READ)
        except ClientError as exc:  # procedures refused (a hardened server): keep bookmarks
            log.warning("the server's edition could not be read; bookmarks stay on",
                        extra={"error": type(exc).__name__})
            records = []
        if records and records[0]["edition"] == "community":
            self.bookmarks = None

    async def check_listening(self) -> None:
        """Fail now (`Unavailable`) when nothing listens at the server's address: one
        connection attempt, never retried. The commands call it before their first statement,
        which the driver would otherwise retry for `timeout` seconds against a port where no
        retry can succeed. Any other failure to connect (a slow or busy server, one restarting)
        is left to the statements, which wait and retry as before; a refusal of the
        credentials is raised as any statement raises it."""
        async with map_errors():
            try:
                await self.driver.verify_connectivity()
            except ServiceUnavailable as exc:
                if nothing_listens(exc):
                    raise

    async def ping(self) -> None:
        """One auto-commit read, never retried: readiness must answer fast when Neo4j is down."""
        await self.touch()
        if not self.schema_applied:
            await self.apply_schema()

    async def touch(self) -> None:
        """One cheap auto-commit read on a pooled connection (opening one if none is free)."""
        try:
            with _in_use():
                async with (timeout_at(self._deadline()), map_errors(),
                            self.session(self.read_access) as session):
                    result = await session.run(self.catalog["health/ping"])
                    await result.consume()
        except TimeoutError:
            raise timed_out() from None

    async def warm(self, connections: int) -> None:
        """Open up to `connections` pooled connections at once, so the first burst of requests
        after a (re)start does not pay for opening them one by one."""
        if connections > 0:
            await asyncio.gather(*(self.touch() for _ in range(connections)))

    async def apply_schema(self) -> None:
        """The schema's statements; the first time, also the server's edition (Community: one
        server, no bookmarks from then on)."""
        async with map_errors():
            for statement in self.catalog.schema_statements():
                await self.driver.execute_query(statement, database_=self.database,
                                                bookmark_manager_=self.bookmarks)
            if not self.schema_applied:  # the first time only
                await self._learn_edition()
        self.schema_applied = True


# Statements a unit of work may send before it knows how its request will end, which read
# (under a lock) and change nothing: the request's audit event goes with the first statement
# after them, so a write that reads first and then declares how it ends (an update,
# `audit_context.expect`) has its event stored complete at its place. A unit of work that
# sends nothing else stored no event, and the request's is created whole by a batch.
READ_UNDER_LOCK = frozenset({"tokens/lock_for_update", "tokens/find_duplicate"})


class Transaction:
    """A managed transaction that runs catalog statements by name: the repositories' unit of
    work wraps one of these, so services never hold a driver transaction."""

    __slots__ = ("_catalog", "_due", "_tx", "event", "ran")

    def __init__(self, tx: AsyncManagedTransaction, catalog: Catalog):
        self._tx = tx
        self._catalog = catalog
        self._due = True  # the request's audit event is yet to be sent
        self.event: dict[str, Any] | None = None  # as sent, inside a request
        self.ran: list[tuple[str, dict[str, Any]]] = []  # (name, params) of each statement

    async def run(self, name: str, /, **params: Any) -> list[neo4j.Record]:
        self.ran.append((name, params))
        text = own = self._catalog.text(name)
        if self._due and name not in READ_UNDER_LOCK:
            self._due = False
            self.event = audit_context.write_event()
            if self.event is not None:
                text, params = (audited_text(text, is_placed(self.event)),
                                audited_params(params, self.event))
        result = await self._tx.run(text, params)
        records = [record async for record in result]
        if not records and text is not own and creates_with_change(own):
            # It carried the event and stored none (no row reached the prefix): the request's
            # next change sends it, and none is counted written at the commit.
            self.event, self._due = None, True
        return records


class _NoBookmarks(neo4j.api.AsyncBookmarkManager):
    """A bookmark manager that keeps none: a session given it sends no bookmark with its
    statements. Without a manager a session sends its own last bookmark with its next
    statement, which a kept session (`IdleSessions`) then does on every statement: on one
    server that guards nothing (docs/adr/0002-no-bookmarks-on-one-server.md) and cost Neo4j
    0.02 ms of CPU a get, as much as keeping the session saved the client."""

    async def update_bookmarks(self, previous_bookmarks: Collection[str],
                               new_bookmarks: Collection[str]) -> None:
        return None

    async def get_bookmarks(self) -> Collection[str]:
        return ()


NO_BOOKMARKS = _NoBookmarks()


class IdleSessions:
    """Sessions kept between auto-commit statements and managed transactions, for one access
    mode. A statement or a transaction takes one (None: it opens one), and gives it back once
    it has read the whole result, or the transaction has ended: the driver has then returned
    the session's connection to its pool, so a kept session holds none. One that raised or was
    cancelled is closed instead. Opening a session for every statement cost the
    client about a tenth more CPU a statement, one at a time or 32 in flight, much of it in
    the configuration each builds, whose objects and the session's own are left in reference
    cycles that only the cyclic collector frees (docs/adr/0036-sessions-kept-between-statements.md).

    A session with a bookmark manager sends the manager's bookmarks, never its own last one:
    on a cluster the process's manager (which holds that one too), on one server
    `NO_BOOKMARKS`, none. `manager` is the `Database.bookmarks` the kept sessions were opened
    under: once that changes (the edition learnt, a manager given), they are closed, and a
    session opened under the old one is not given back. At most `limit` are kept (the driver's
    connections bound how many statements run at once)."""

    __slots__ = ("_sessions", "limit", "manager")

    def __init__(self, manager: neo4j.api.AsyncBookmarkManager | None = None,
                 limit: int = 256):
        self._sessions: list[neo4j.AsyncSession] = []
        self.limit = limit
        self.manager = manager

    def take(self) -> neo4j.AsyncSession | None:
        return self._sessions.pop() if self._sessions else None

    def give(self, session: neo4j.AsyncSession) -> bool:
        """Keep `session`; False when `limit` are kept already (the caller closes it)."""
        if len(self._sessions) >= self.limit:
            return False
        self._sessions.append(session)
        return True

    async def close(self, manager: neo4j.api.AsyncBookmarkManager | None = None) -> None:
        """Close the kept sessions; those kept from now on are opened under `manager`."""
        sessions, self._sessions, self.manager = self._sessions, [], manager
        for session in sessions:
            await session.close()

    async def retire(self) -> None:
        """Close the kept sessions and keep none from now on: a statement that ends after its
        `Database` (or harness) closed closes its session instead of leaving it kept."""
        self.limit = 0
        await self.close(self.manager)


def kept_sessions(manager: neo4j.api.AsyncBookmarkManager | None = None
                  ) -> dict[str, IdleSessions]:
    """One `IdleSessions` per access mode, opened under `manager`."""
    return {mode: IdleSessions(manager) for mode in (neo4j.READ_ACCESS, neo4j.WRITE_ACCESS)}


async def retire_sessions(sets: dict[str, IdleSessions]) -> None:
    """Retire every set of `kept_sessions`: their sessions closed, none kept from now on."""
    for idle in sets.values():
        await idle.retire()


def begin_with_first_statement(session: neo4j.AsyncSession) -> contextlib.AbstractContextManager:
    """While entered, `session`'s next transaction sends its BEGIN with its first statement,
    not alone ahead of it: one round trip fewer a transaction, as the driver's own
    `execute_query` begins its transactions. The driver keeps the switch private; a driver
    without it begins as before."""
    switch = getattr(session, "_pipelined_begin", None)  # false until entered: no `or`
    return contextlib.nullcontext() if switch is None else switch


class _in_use:
    """Counts the driver sessions at work (each holds a pooled connection while it runs). A
    class, not a generator, and not async: every statement enters one."""

    __slots__ = ()

    def __enter__(self) -> None:
        metrics.NEO4J_SESSIONS_IN_USE.inc()

    def __exit__(self, *exc: object) -> bool:
        metrics.NEO4J_SESSIONS_IN_USE.dec()
        return False
