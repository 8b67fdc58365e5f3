"""Statements written or read together: a request's create or get sent while others of its kind
are in flight goes into one statement with those that wait beside it.

Neo4j's CPU for a create is mostly the statement's and its transaction's own, not the token's:
a token created as one row of eight in one statement cost Neo4j about a third of what it cost
in a statement of its own (docs/performance.md, "Creates written together"). A get's read is
cheaper still as a row: Neo4j's CPU a token and the driver's in this process both fell to a
fifth or less as one row of eight ("Gets read together"). So `_Lanes` keeps at most `lanes`
statements of its kind in flight. A call that finds a lane free is sent at once, alone, as it
always was (`single`: the statement, nothing waits). One that finds every lane busy waits;
when a lane's statement ends, the calls waiting for it (up to `max_rows`) go in one statement
(`batch`), each its own row, and each request still gets its own answer.

`Together` writes creates so, each row with its own tenant and its own audit event, signed at
its own place as its single statement would store it: a create's 409 stays its id's alone (a
live holder answers `taken` on its row, which then stores no event: its request's 409 waits
for its event, written at its place as the request ends, as when a create alone is refused by
the constraint). `ReadTogether` reads gets so (tokens/get_batch): a row that finds no token
visible to its request answers None, as the statement alone returns no record.

What a batch keeps of a single statement:
- each create's event is created in the statement that creates its token: they commit
  together (a read's event is the audit writer's, after the read, as for a read alone);
- the batch's transaction ends (Neo4j's timeout) by the earliest deadline of its requests, and
  transient errors are retried until then, as a single statement's are; a call with less than
  `ALONE_BELOW` seconds left is never put in a batch, so one request near its deadline cannot
  cut the others' time short;
- a failure that rolled the batch back without naming a row (Neo4j refused the statement; for
  creates, the uniqueness constraint raced twice) sends each row again alone, in its own
  request, as if it had never waited; any other failure (the database unavailable, the commit
  unconfirmed, the deadline passed) is every row's answer, as it would have been alone;
- a request that stops waiting (its deadline, its client gone) before its batch is sent is
  never written or read.

Only a create whose event the request can store at its place (or which has none: outside a
request) is written together: a deduplicating create, one whose event is stored pending, or one
holding an Idempotency-Key entry is always sent alone (`single`, with its own prefix), as
before. A create under a parent is written together with those of the same readable prefixes
(the parent's check takes them); a row whose parent is not found (gone, or not the caller's to
read) stores nothing, and its request's 404 waits for its event, as a taken id's 409 does.
The token repository makes no `Together` when VAULTGRAPH_CREATE_BATCH_MAX is 1, and no
`ReadTogether` when VAULTGRAPH_GET_BATCH_MAX is 1: every create, or every get, is then sent
alone.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import copy
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from neo4j.exceptions import ClientError

from .. import metrics
from ..audit import context as audit_context
from ..deadline import spending, timeout_at
from ..errors import UniquenessViolation
from .audit_form import placed_parts
from .audit_prefix import is_placed
from .neo4j_errors import timed_out

if TYPE_CHECKING:
    from .database import Database


T = TypeVar("T")

# A call with less time than this left is never put in a batch: it is sent alone.
ALONE_BELOW = 0.5


class _RunAlone(Exception):
    """The batch failed in a way that says nothing of any one row: each is sent again alone."""


@dataclass(slots=True, eq=False)
class _Waiting:
    shared: tuple  # the batch's own parameters (a batch holds rows of one value of them)
    row: dict[str, Any]
    until: float  # the request's deadline, on the loop's clock
    future: asyncio.Future


class _Lanes:
    """At most `lanes` statements of one kind in flight. A call that finds a lane free is
    sent at once, alone, in its own statement (`single`); one that finds every lane busy waits
    (`_wait`), and when a lane's statement ends, what waits (up to `max_rows`, of one value of
    the batch's own parameters) goes as rows of one statement (`batch`, `_send`)."""

    def __init__(self, db: Database, single: str, batch: str, *, lanes: int, max_rows: int):
        self._db = db
        self.single, self.batch = single, batch
        self._lanes, self._max_rows = lanes, max_rows
        self._busy = 0
        self._waiting: collections.deque[_Waiting] = collections.deque()
        self._tasks: set[asyncio.Task] = set()

    def _lane_free(self) -> bool:
        """Whether a lane was free: if so, the caller holds it and must end it (`_alone`)."""
        if self._busy < self._lanes:
            self._busy += 1
            return True
        return False

    async def _alone(self, sent: Awaitable[T]) -> T:
        """`sent`'s result, in the lane `_lane_free` gave the caller, which ends with it."""
        try:
            return await sent
        finally:
            self._next()

    async def _wait(self, shared: dict[str, Any], row: dict[str, Any]) -> Any:
        """`row`'s answer from the batch it goes in, sent with the batch parameters `shared`;
        raises `_RunAlone` when the caller should send it alone."""
        waiting = _Waiting(tuple(shared.items()), row, self._db.deadline_at(),
                           asyncio.get_running_loop().create_future())
        future = waiting.future
        self._waiting.append(waiting)
        try:
            with spending():
                async with timeout_at(waiting.until):
                    return await future
        except TimeoutError:
            if not _answered(future):
                raise timed_out() from None
            return future.result()  # answered as the deadline passed: the answer stands
        finally:
            if future.cancelled():  # stopped waiting before its batch: never sent
                with contextlib.suppress(ValueError):
                    self._waiting.remove(waiting)

    def _next(self) -> None:
        """A lane's statement ended: it takes what waits, or is free."""
        if any(not w.future.done() for w in self._waiting):
            # A context of its own: the batch belongs to no one request.
            task = asyncio.get_running_loop().create_task(self._drain(),
                                                          context=contextvars.Context())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._busy -= 1

    async def _drain(self) -> None:
        try:
            while batch := self._take():
                await self._send(batch)
        finally:
            self._busy -= 1

    def _take(self) -> list[_Waiting]:
        """Up to `max_rows` of what waits, in order, all with the first one's parameters (the
        others keep their places). One with less than `ALONE_BELOW` seconds left is sent alone
        by its own request, within what it has left: a batch is bounded by the earliest
        deadline among its rows, and must not take the others' time from them."""
        waiting, batch, later = self._waiting, [], []
        soon = asyncio.get_running_loop().time() + ALONE_BELOW
        while waiting and len(batch) < self._max_rows:
            w = waiting.popleft()
            if w.future.done():  # its request stopped waiting
                continue
            if w.until < soon:
                w.future.set_exception(_RunAlone())
                continue
            (batch if not batch or w.shared == batch[0].shared else later).append(w)
        waiting.extendleft(reversed(later))
        return batch

    async def _send(self, batch: list[_Waiting]) -> None:
        """Send `batch` as rows of one statement and answer each row's future."""
        raise NotImplementedError


def _rows(sent: list[_Waiting]) -> dict[str, Any]:
    """A batch's parameters: its own, and each row with its place in the batch."""
    return {**dict(sent[0].shared), "rows": [{**w.row, "index": i} for i, w in enumerate(sent)]}


class Together(_Lanes):
    def __init__(self, db: Database, single: str, batch: str, *, lanes: int = 2,
                 max_rows: int = 10):
        super().__init__(db, single, batch, lanes=lanes, max_rows=max_rows)

    async def write(self, params: dict[str, Any], shared: dict[str, Any],
                    row: dict[str, Any]) -> dict[str, Any] | None:
        """The single statement's record for `params` (its only row; None when it returns
        none: its parent is not found), or the batch's record for `row`, sent with the batch
        parameters `shared` (None when the row's parent is not found): either way {token,
        deduplicated, taken, orphan}."""
        db = self._db
        event = audit_context.write_event()
        if event is not None and (not is_placed(event)
                                  or audit_context.claimed_key() is not None):
            return _one(await db.write_event_with(self.single, params, event))
        if self._lane_free():
            return _one(await self._alone(db.write_event_with(self.single, params, event)))
        try:
            record = await self._wait(shared, {**row, **row_event(event)})
        except _RunAlone:
            return _one(await db.write_event_with(self.single, params, event))
        if record["orphan"]:  # no parent, so nothing stored: its 404 waits for its event
            return None
        if not record["taken"]:  # a taken id stored nothing: its 409 waits for its event
            db.written(self.single, params, audited=event is not None)
        return record

    async def _send(self, batch: list[_Waiting]) -> None:
        metrics.WRITES_TOGETHER.observe(len(batch))
        # By parent (tenant and id): two statements lock the parents they share in one order.
        batch.sort(key=_parent)
        outcome: BaseException = _RunAlone()
        for _ in range(2):
            # Only rows whose requests still wait: one that stopped is never written.
            sent = [w for w in batch if not w.future.done()]
            if not sent:
                return
            try:
                records = await self._db.write_rows(self.batch, _rows(sent),
                                                    min(w.until for w in sent))
            except UniquenessViolation:
                # Raced by another create for one of the ids: once more reads it as taken;
                # twice, each row goes alone.
                continue
            except ClientError:
                break  # refused, so rolled back: each row alone gets its own answer
            except asyncio.CancelledError:
                _fail(sent, timed_out())
                raise
            except Exception as exc:  # unavailable, unconfirmed: every row's answer
                outcome = exc
                break
            for record in records:
                future = sent[record["index"]].future
                if not future.done():
                    future.set_result(_answer(record))
            _fail(sent, RuntimeError("the batch of creates returned no row for this one"))
            return
        _fail(batch, outcome)


class ReadTogether(_Lanes):
    """Reads of one token each, read together: the statement `single` returns the token's
    record for its parameters, or none; `batch` takes `rows` ({index, ...} each) beside the
    batch's own parameters and returns a record with `index` for each row that found its
    token. A read changes nothing, so whatever refuses a batch (Neo4j refused the statement)
    sends each row again alone, and any other failure is every row's answer.

    `shared` names the parameters of `single` that a batch takes once, for all its rows (only
    reads with the same values of them share a batch); the others go in each row."""

    def __init__(self, db: Database, single: str, batch: str, *, shared: tuple[str, ...],
                 lanes: int, max_rows: int):
        super().__init__(db, single, batch, lanes=lanes, max_rows=max_rows)
        self._shared = shared

    async def read(self, params: dict[str, Any]) -> Any | None:
        """The record `single` returns for `params` (None: none), alone or as a batch's row."""
        db = self._db
        if self._lane_free():
            return _first(await self._alone(db.read(self.single, **params)))
        names = self._shared
        try:
            return await self._wait({name: params[name] for name in names},
                                    {k: v for k, v in params.items() if k not in names})
        except _RunAlone:
            return _first(await db.read(self.single, **params))

    async def _send(self, batch: list[_Waiting]) -> None:
        metrics.READS_TOGETHER.observe(len(batch))
        sent = [w for w in batch if not w.future.done()]  # one that stopped is never read
        if not sent:
            return
        try:
            records = await self._db.read_rows(self.batch, _rows(sent),
                                               min(w.until for w in sent))
        except ClientError:
            _fail(sent, _RunAlone())  # refused: each row alone gets its own answer
            return
        except asyncio.CancelledError:
            _fail(sent, timed_out())
            raise
        except Exception as exc:  # unavailable, past the deadline: every row's answer
            _fail(sent, exc)
            return
        found = {record["index"]: record for record in records}
        for i, w in enumerate(sent):
            if not w.future.done():
                w.future.set_result(found.get(i))


def _fail(batch: list[_Waiting], outcome: BaseException) -> None:
    """`outcome` for each row still waiting, a copy each (each request raises its own)."""
    for w in batch:
        if not w.future.done():
            w.future.set_exception(copy.copy(outcome))


def _answered(future: asyncio.Future) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def row_event(event: dict[str, Any] | None) -> dict[str, Any]:
    """A row's event, as tokens/create_batch creates it: its place apart from its other
    fields; none outside a request (the row then stores no event, as a write alone)."""
    if event is None:
        return {"audit_chain": None}
    parts = placed_parts(event)
    fields = dict(parts["fields"])
    return {"audit_chain": fields.pop("chain"), "audit_seq": fields.pop("seq"),
            "audit": fields, "audit_at": parts["at"], "audit_refs": parts["refs"],
            "audit_tenant_key": parts["tenant_key"]}


def _parent(waiting: _Waiting) -> tuple[str, str]:
    row = waiting.row
    return row["tenant_id"], row.get("parent_id") or ""


def _one(records: list) -> dict[str, Any] | None:
    return _answer(records[0]) if records else None


def _first(records: list) -> Any | None:
    return records[0] if records else None


def _answer(record: Any) -> dict[str, Any]:
    """A create's record, alone (no `taken`: a taken id fails it) or as a batch's row."""
    return {"token": record["token"], "deduplicated": record["deduplicated"],
            "taken": record.get("taken", False), "orphan": record.get("orphan", False)}
