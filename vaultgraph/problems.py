"""Errors as RFC 7807 problems. Messages are fixed text: never input values, never internals."""

from __future__ import annotations

from http import HTTPStatus

PROBLEM_TYPE_BASE = "https://vaultgraph.dev/problems/"


class Problem(Exception):
    status = 500
    slug = "internal"
    title = "Internal Server Error"

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
        if self.errors:
            out["errors"] = self.errors
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
PayloadTooLarge = _problem(413, "payload-too-large")
UnsupportedMediaType = _problem(415, "unsupported-media-type")
ServiceUnavailable = _problem(503, "unavailable")
InternalError = Problem


def invalid(field: str, message: str) -> BadRequest:
    """A 400 naming one field."""
    return BadRequest("The request is invalid.", errors={field: [message]})
