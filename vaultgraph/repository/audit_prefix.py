"""The audit prefix: what `Database.write` (and the first statement of `Database.transaction` that
may change data) adds to every write statement sent inside a request, so the request's audit
event is created in the write's own transaction: in front of the statement, or where its
`AUDIT_HERE` line says. A catalog statement's text does not show it; the statement Neo4j
receives (and plans, and lists in SHOW TRANSACTIONS) is that text with `AUDIT_PREFIX` added so,
and the prefix's parameters (`audited_params`) added to the statement's own.
docs/architecture.md, "The audit prefix"."""

from __future__ import annotations

from typing import Any

from ..audit import context as audit_context
from ..audit.event import WRITE
from .audit_form import placed_parts
from .records import at_number

# A write's audit event is created by the write's own statement: this unit subquery runs first
# (or where the statement's AUDIT_HERE line is, once for the row that reaches it), once, and
# commits or rolls back with the change. The event is completed and linked into its
# chain by the audit writer (services/audit_writer.py) when the request's outcome is known. Its `at`
# arrives apart from the rest, as the integer it is stored as (microseconds since 1970,
# repository/audit.py `at_number`, docs/adr/0028), and is stored once. The event is created with
# its properties (null ones are left out), not created bare and then SET: its label's uniqueness
# constraint is checked once so, and a create's event cost Neo4j 0.10 ms less
# (docs/performance.md, "The constraint on a write event's place").
# When the request holds an Idempotency-Key entry ($idem_*), the same transaction marks it
# `written` and keeps the tokens the request had named when the write was sent
# (`$idem_written`, a map, so the plan does not depend on how many): committed with the
# change, rolled back with it, so a retry after an answer that never came knows whether the
# first request changed anything, and what (cypher/idempotency/claim). A unit subquery: it
# never changes the statement's rows; a seek on the entry's key, which finds nothing when the
# request holds no entry (null parameters).
AUDIT_PREFIX = ("CALL () { CREATE (audit_event:AuditEvent:PendingAuditEvent $audit) "
                "SET audit_event.at = $audit_at }\n"
                "CALL () { MATCH (idem_key:IdempotencyKey {application_id: $idem_application, "
                "key: $idem_key}) WHERE idem_key.claim = $idem_claim "
                "SET idem_key.written = true, idem_key.token_ids = $idem_written.token_ids }\n")


# A declaring write's event (a create's, a tokenize's, an update's, a delete's, an unlink's:
# `audit_context.expect`) stored complete, signed at its place in its writer's chain of write
# events (services/audit_writer.py `place`): labelled :WriteAuditEvent, unique by its place, so the
# statement run a second time is refused; an event naming several tokens (a child token's, its
# parent's too) gets its AUDIT_REF self-loops here, as a batch gives a created event. Nothing
# writes to it again when its request ends as it says.
PLACED_PREFIX = ("CALL () { CREATE (audit_event:AuditEvent:WriteAuditEvent $audit) "
                 "SET audit_event.at = $audit_at "
                 "FOREACH (ref IN $audit_refs | CREATE (audit_event)-[:AUDIT_REF {tenant_key: "
                 "$audit_tenant_key, token_key: ref[0], token_rest: ref[1], "
                 "at: audit_event.at}]->(audit_event)) }\n"
                 + AUDIT_PREFIX[AUDIT_PREFIX.index("CALL () { MATCH (idem_key"):])


def is_placed(event: dict[str, Any]) -> bool:
    """Whether a write's event is stored complete at its place (`PLACED_PREFIX`)."""
    return event.get("kind") == WRITE


# A statement whose text holds this line creates the request's event there, not in front: after
# the clauses that decide whether it changes anything, so a statement that changes nothing (no
# row reaches the line) stores no event, and the request's event goes with its next write
# (cypher/tokens/update, which writes only a token still as its update read it).
AUDIT_HERE = "// The audit prefix goes here (repository/audit_prefix.py AUDIT_HERE)."


def audited_text(text: str, placed: bool = False) -> str:
    return with_prefix(PLACED_PREFIX if placed else AUDIT_PREFIX, text)


def with_prefix(prefix: str, text: str) -> str:
    """`text` with `prefix` where its `AUDIT_HERE` line is, or in front. Nothing after that
    line may drop a row (only unit subqueries, FOREACH, WITH and RETURN of the row)."""
    head, here, tail = text.partition(AUDIT_HERE + "\n")
    return head + prefix + tail if here else prefix + text


def creates_with_change(text: str) -> bool:
    """Whether a statement creates its request's event only when a row reaches `AUDIT_HERE`: it
    stored the event if and only if it returned a row."""
    return AUDIT_HERE + "\n" in text


def audited_params(params: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """A write statement's parameters with the request's event for `AUDIT_PREFIX`: its `at` as
    an integer (`at_number`) in a parameter of its own, the rest as a map; for
    `PLACED_PREFIX`, the event's stored form and its AUDIT_REFs' keys
    (repository/audit.py `placed_parts`)."""
    idem = audit_context.claimed_key()
    held = idem or {}
    if is_placed(event):
        parts = placed_parts(event)
        audit = {"audit": parts["fields"], "audit_at": parts["at"],
                 "audit_refs": parts["refs"], "audit_tenant_key": parts["tenant_key"]}
    else:
        fields = dict(event)
        audit = {"audit": fields, "audit_at": at_number(fields.pop("at", None))}
    return {**params, **audit,
            "idem_application": held.get("application_id"), "idem_key": held.get("key"),
            "idem_claim": held.get("claim"),
            "idem_written": {"token_ids": audit_context.written_tokens()} if idem else None}
