"""Errors as RFC 9457 problems: the HTTP face of the domain errors in `vaultgraph/errors.py`.

Messages are fixed text: never input values, never internals.
"""

from __future__ import annotations

import itertools
from http import HTTPStatus

from marshmallow import Schema, fields

from .. import errors

PROBLEM_TYPE_BASE = "https://vaultgraph.dev/problems/"


class ProblemSchema(Schema):
    """An RFC 9457 (formerly 7807) problem detail."""

    type = fields.String(required=True, metadata={
        "format": "uri", "description": "Identifies the kind of problem."})
    title = fields.String(required=True, metadata={"description": "The HTTP status phrase."})
    status = fields.Integer(required=True, metadata={"description": "The HTTP status code."})
    detail = fields.String(required=True, metadata={
        "description": "What went wrong; never echoes submitted values."})
    errors = fields.Dict(keys=fields.String(), values=fields.List(fields.String()), metadata={
        "description": "Validation messages by field (`a.b` for nested fields)."})
    trace_id = fields.String(metadata={
        "description": "The request's trace id (as in the `SVC-TRACE-ID` header)."})


class Problem(Exception):
    status = 500
    slug = "internal"
    title = "Internal Server Error"
    close = False  # the connection closes after this answer (its request was not read whole)

    def __init__(self, detail: str | None = None, *, errors: dict[str, list[str]] | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(detail or self.title)
        self.detail = detail
        self.errors = errors
        self.headers = headers or {}

    def body(self) -> dict:
        out = {
            "type": PROBLEM_TYPE_BASE + self.slug,
            "title": self.title,
            "status": self.status,
            "detail": self.detail or self.title,
        }
        if self.errors:  # bounded however it was built (`errors.add_error`)
            out["errors"] = {errors.field_name(name): messages for name, messages
                             in itertools.islice(self.errors.items(), errors.MAX_LISTED_ERRORS)}
        return out


def _problem(status: int, slug: str) -> type[Problem]:
    title = HTTPStatus(status).phrase
    return type(slug.title().replace("-", "") + "Problem", (Problem,),
                {"status": status, "slug": slug, "title": title})


BadRequest = _problem(400, "validation")
Unauthorized = _problem(401, "unauthorized")
Forbidden = _problem(403, "forbidden")
NotFound = _problem(404, "not-found")
MethodNotAllowed = _problem(405, "method-not-allowed")
Conflict = _problem(409, "conflict")
# The first request under an `Idempotency-Key` still running: a type of its own, so a client
# tells "retry after Retry-After" apart from a 409 that retrying does not change.
KeyInFlight = _problem(409, "idempotency-key-in-flight")
RequestTimeout = _problem(408, "request-timeout")
PayloadTooLarge = _problem(413, "payload-too-large")
UnsupportedMediaType = _problem(415, "unsupported-media-type")
UnprocessableContent = _problem(422, "idempotency-key-reused")
TooManyRequests = _problem(429, "rate-limited")
BadGateway = _problem(502, "bad-gateway")
ServiceUnavailable = _problem(503, "unavailable")
Integrity = _problem(500, "integrity")
InternalError = Problem

# Each domain error, and the problem that answers it (the first match in MRO order wins).
_BY_ERROR: dict[type[errors.VaultError], type[Problem]] = {
    errors.Invalid: BadRequest,
    errors.Unauthenticated: Unauthorized,
    errors.Forbidden: Forbidden,
    errors.NotFound: NotFound,
    errors.KeyInFlight: KeyInFlight,
    errors.Conflict: Conflict,
    errors.UniquenessViolation: Conflict,
    errors.TooLarge: PayloadTooLarge,
    errors.Unavailable: ServiceUnavailable,
    errors.IntegrityFailure: Integrity,
    errors.KeyReused: UnprocessableContent,
    errors.RateLimited: TooManyRequests,
    errors.DestinationFailed: BadGateway,
}


def from_error(exc: errors.VaultError) -> Problem:
    """The problem that answers a domain error."""
    cls = next((_BY_ERROR[k] for k in type(exc).__mro__ if k in _BY_ERROR), InternalError)
    problem = cls(exc.detail)
    if isinstance(exc, errors.Invalid) and exc.errors:
        problem.errors = exc.errors
    if isinstance(exc, errors.Unavailable | errors.RateLimited | errors.KeyInFlight):
        problem.headers["Retry-After"] = str(exc.retry_after)
    return problem


def invalid(field: str, message: str) -> BadRequest:
    """A 400 naming one field."""
    return BadRequest("The request is invalid.", errors={field: [message]})
