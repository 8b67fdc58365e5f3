"""Typed errors: every non-2xx answer becomes an ApiError subclass carrying the problem body
(RFC 7807, application/problem+json) and the trace id the service answered with."""

from __future__ import annotations

from typing import Any


class VaultgraphError(Exception):
    """Base of every error the client raises."""


class TransportError(VaultgraphError):
    """The service could not be reached (connection refused, reset, timed out)."""


class ApiError(VaultgraphError):
    """The service answered with an error status.

    `problem` is the service's problem body (type, title, status, detail and, for validation
    errors, `errors` by field); the service never echoes input in it. `trace_id` is the
    SVC-TRACE-ID header of the answer: quote it when asking the operator about a request.
    """

    status: int = 0

    def __init__(self, status: int, problem: dict[str, Any], trace_id: str | None,
                 retry_after: float | None = None):
        self.status = status
        self.problem = problem
        self.trace_id = trace_id
        self.retry_after = retry_after
        title = problem.get("title") or "error"
        # The service's detail (its own words: it never echoes input), so a traceback says what
        # was wrong; of a validation error's fields only how many: their names can be the
        # caller's (metadata keys, unknown fields, a payload's paths), read them on `errors`.
        detail = problem.get("detail")
        fields = problem.get("errors")
        said = (f": {detail}" if detail else "") + (
            f" ({len(fields)} field{'s' if len(fields) != 1 else ''}: see .errors)"
            if isinstance(fields, dict) and fields else "")
        super().__init__(f"{status} {title}{said} (trace id {trace_id or '-'})")

    @property
    def type(self) -> str | None:
        return self.problem.get("type")

    @property
    def detail(self) -> str | None:
        return self.problem.get("detail")

    @property
    def errors(self) -> dict[str, list[str]]:
        """Validation messages by field name (400), empty otherwise."""
        return self.problem.get("errors") or {}


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class PayloadTooLarge(ApiError):
    status = 413


class UnsupportedMediaType(ApiError):
    status = 415


class UnprocessableContent(ApiError):
    """422: the Idempotency-Key was used before with another request
    (type `…/idempotency-key-reused`); send this request under a new key."""

    status = 422


class RateLimited(ApiError):
    status = 429


class ServerError(ApiError):
    """5xx: the service or its database failed; retried before it is raised."""


_BY_STATUS: dict[int, type[ApiError]] = {
    cls.status: cls for cls in (BadRequest, Unauthorized, Forbidden, NotFound, Conflict,
                                PayloadTooLarge, UnsupportedMediaType, UnprocessableContent,
                                RateLimited)
}


def error_for(status: int) -> type[ApiError]:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else ApiError
