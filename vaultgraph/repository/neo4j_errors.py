"""Driver failures mapped to domain errors at the repository edge (`map_errors`), each counted
by kind in the metrics."""

from __future__ import annotations

import logging

from neo4j.exceptions import (
    AuthError,
    ConstraintError,
    DriverError,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
    TransientError,
)

from .. import metrics
from ..errors import Misconfigured, TimedOut, Unavailable, UniquenessViolation

# The database module's logger, as before the split: log lines keep their logger name.
log = logging.getLogger("vaultgraph.repository.database")

UNAVAILABLE = (ServiceUnavailable, SessionExpired)


def timed_out() -> TimedOut:
    return TimedOut("The database did not answer in time; try again shortly.")


class map_errors:
    """Translate driver failures into domain errors at the repository edge."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb):
        if exc is None:
            return False
        kind = error_kind(exc)
        if kind is not None:
            metrics.NEO4J_ERRORS.labels(kind).inc()
        if isinstance(exc, ConstraintError):
            raise UniquenessViolation() from exc
        if isinstance(exc, Neo4jError) and "TransactionTimedOut" in (exc.code or ""):
            # Neo4j ended the transaction at the budget's end (`database._bounded`): as a deadline.
            raise timed_out() from exc
        if isinstance(exc, AuthError):
            # Configuration, not an outage: the operator must fix the credentials.
            log.error("neo4j refused the service's credentials: check VAULTGRAPH_NEO4J_USER "
                      "and VAULTGRAPH_NEO4J_PASSWORD")
            raise Misconfigured() from exc
        if isinstance(exc, (*UNAVAILABLE, TransientError)) or (
                isinstance(exc, DriverError) and not isinstance(exc, Neo4jError)):
            log.warning("neo4j unavailable", extra={"error": type(exc).__name__})
            raise Unavailable() from exc
        return False


def error_kind(exc: BaseException) -> str | None:
    """The metrics label of a driver failure (metrics.NEO4J_ERROR_KINDS); None: not Neo4j's."""
    if isinstance(exc, UNAVAILABLE):
        return "unavailable"
    if isinstance(exc, TransientError):
        return "transient"
    if isinstance(exc, ConstraintError):
        return "constraint"
    if isinstance(exc, Neo4jError):
        return "database"
    if isinstance(exc, DriverError):
        return "driver"
    return None
