"""Audit events of the command line's changes (docs/audit.md, "The command line").

A command that changes a tenant's access (`tenants create`, `applications create`,
`rotate-key`, `revoke-key`, `keys rotate`) leaves an event in that tenant's trail, written by
the process's audit writer as a request's is. A change is made under a note of its own
(`CommandTrail.change`), so its write statement stores the event with the change, in one
transaction (the audit prefix, repository/audit_prefix.py), and the writer then links it into
one of the process's chains before the command goes on (`keys rotate`: before the next
tenant's re-wrap) and reports success.

No API key acts: the event names no caller. Its `application_id` and `key_id` are the
application and the key the command acted on (a key's id, never the key), its route is
`CLI <command>`, its `user_agent` names the command line and the operating-system user who ran
it, and its `trace_id` is the command's run, the same on each event one run leaves.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from ..errors import Conflict, Forbidden, Invalid, NotFound, Unavailable, VaultError
from . import context
from .event import MAX_USER_AGENT, bounded_text

T = TypeVar("T")

# The operation of a key-encryption key rotation's event: no route does it, so no permission
# names it (GET /logs' `operation` filter takes permissions only).
KEK_ROTATE = "kek:rotate"
# The status a failed change's event records, by the error (as the service answers it).
_FAILED = ((NotFound, 404), (Conflict, 409), (Forbidden, 403), (Invalid, 400),
           (Unavailable, 503))


def failed_status(exc: Exception) -> int:
    return next((status for kind, status in _FAILED if isinstance(exc, kind)), 500)


@dataclass(frozen=True, slots=True)
class Affected:
    """What a command's event names in place of a caller's principal: the tenant, and the
    application and key the command changed."""

    tenant_id: str | None = None
    application_id: str | None = None
    key_id: str | None = None

    def ids_only(self) -> Affected:
        """Each id as an event may hold it: a UUID in its canonical text (every tenant,
        application and key id the service makes is one), else none. What an operator typed
        that names nothing (an API key pasted where an id goes) never reaches the trail."""
        return Affected(*(_canonical(value)
                          for value in (self.tenant_id, self.application_id, self.key_id)))


def _canonical(value: str | None) -> str | None:
    """A UUID as the service writes it (any spelling `uuid.UUID` reads, as the service parses
    the ids it is given), else None."""
    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        return None


def os_user() -> str:
    """The operating-system user running the command, as the system names its effective uid
    (not as the environment's USER or LOGNAME say, which whoever runs it sets), with the uid:
    `alice (uid 1000)`. Where the system has no name for the uid (a container's arbitrary uid),
    `getpass.getuser()`'s, else the uid alone. No host and no version: the event is in the
    tenant's trail, which the tenant's auditor reads (`GET /logs`)."""
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    try:
        import pwd

        name = pwd.getpwuid(uid).pw_name if uid is not None else getpass.getuser()
    except (ImportError, KeyError, OSError):
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = "unknown"
    return f"{name} (uid {uid})" if uid is not None else name


class EventNotLinked(VaultError):
    """The change committed, but its event could not be linked into its chain: `stored`, the
    change's write stored it (pending: `audit verify` names it `unlinked`); not, no statement
    of the change carried it and it is not written. `result` is the change's."""

    def __init__(self, result: Any, event_id: str, *, stored: bool):
        super().__init__("The audit event of this change could not be written.")
        self.result = result
        self.event_id = event_id
        self.stored = stored

    def explained(self) -> tuple[str, str]:
        """The command's one line: what happened, what to do."""
        if self.stored:
            return (f"the change was made and its audit event {self.event_id} stored with it, "
                    "but the event could not be linked into its chain (vaultgraph audit verify "
                    "names it unlinked)",
                    "the change stands (what it printed is valid): do not run the command "
                    "again; check that Neo4j is reachable")
        return ("the change was made, but its audit event could not be written",
                "the change stands (what it printed is valid): record who ran it by hand, "
                "and check that Neo4j is reachable")


class CommandTrail:
    """The events of one command run, written through `writer` (services/audit_writer.py
    `AuditWriter`: `record`)."""

    def __init__(self, writer: Any, command: str):
        self._writer = writer
        self.route = f"CLI {command}"
        self.trace_id = uuid.uuid4().hex
        self.user_agent = bounded_text(f"vaultgraph command line; user {os_user()}",
                                       MAX_USER_AGENT)

    def note(self, operation: str, affected: Affected, reason: str | None = None
             ) -> context.AuditNote:
        note = context.AuditNote(id=str(uuid.uuid4()), at=datetime.now(UTC),
                                 operation=operation, route=self.route,
                                 trace_id=self.trace_id, user_agent=self.user_agent,
                                 reason=reason)
        note.principal = affected.ids_only()
        return note

    async def change(self, operation: str, affected: Affected,
                     work: Callable[[], Awaitable[tuple[T, Affected]]], *, status: int,
                     reason: str | None = None) -> T:
        """Run `work` (the change: its result, and what it affected, the ids it made included)
        with its event, which its write stores with it (`affected`: what is known before), then
        link the event, answered `status`, and return the result. Raises `EventNotLinked`
        (with the result) when the change committed and its event could not be linked.

        A change that fails after its write was sent leaves its event too, answered as it
        failed (`failed_status`), as a request's does: linked where the write stored it (a
        statement that matched nothing still commits its event), created where it rolled
        back, and the command fails with its own error whether or not that is written. A
        change refused before any write was sent (an unknown id found by a read) leaves none."""
        note = self.note(operation, affected, reason)
        token = context.current.set(note)
        try:
            result, affected = await work()
        except Exception as exc:
            context.current.reset(token)
            token = None
            if note.stored is not None:
                with contextlib.suppress(VaultError):
                    await self._writer.record(note.event(failed_status(exc)),
                                              stored=note.stored)
            raise
        finally:
            if token is not None:
                context.current.reset(token)
        try:
            await self._writer.record(note.event(status, affected.ids_only()),
                                      stored=note.stored)
        except VaultError:
            raise EventNotLinked(result, note.id, stored=note.persisted) from None
        return result
