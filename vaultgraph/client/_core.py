"""What the sync and async clients share: request shapes, the retry policy, error mapping."""

from __future__ import annotations

import email.utils
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from .errors import ApiError, error_for

API_KEY_HEADER = "SVC-API-KEY"
TRACE_HEADER = "SVC-TRACE-ID"
IDEMPOTENCY_HEADER = "Idempotency-Key"
MERGE_PATCH = "application/merge-patch+json"
# Retried: the service did not do the work (429) or may not have (502, 503, 504, transport
# errors; a write Neo4j committed whose answer was lost is answered 503, docs/audit.md). POSTs
# carry an Idempotency-Key, the same on every attempt, so a retried create is the same request
# to the service; a PATCH carries none and is retried only on 429
# (docs/python-client.md); a DELETE whose retry finds nothing is done (`delete_done`).
RETRY_STATUSES = frozenset({429, 502, 503, 504})
# An attempt that got one of these (or no answer) may have done its work.
UNCERTAIN_STATUSES = frozenset({502, 503, 504})
# The service's 409 to a request whose Idempotency-Key is held by a request still running
# (vaultgraph/services/idempotency.py): told apart from other 409s by its problem type, or, from
# a service that gives it the type every 409 has (`…/conflict`), by its `detail`.
IN_FLIGHT_TYPE = "https://vaultgraph.dev/problems/idempotency-key-in-flight"
IN_FLIGHT_DETAIL = "A request with this Idempotency-Key is still being processed; retry later."


@dataclass(frozen=True)
class RetryPolicy:
    """At most `attempts` tries; waits Retry-After when the service sends it (capped at
    `max_wait`), else exponential backoff from `backoff` with full jitter."""

    attempts: int = 4
    backoff: float = 0.2
    max_wait: float = 30.0

    def wait(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_wait)
        return min(self.backoff * 2 ** attempt * random.random(), self.max_wait)  # noqa: S311


NO_RETRIES = RetryPolicy(attempts=1)


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def build_request(client: httpx.Client | httpx.AsyncClient, method: str, path: str, *,
                  json: Any = None, params: Any = None, content_type: str | None = None,
                  idempotency_key: str | None = None, trace_id: str | None = None
                  ) -> httpx.Request:
    headers: dict[str, str] = {}
    if method == "POST":
        headers[IDEMPOTENCY_HEADER] = idempotency_key or str(uuid.uuid4())
    if trace_id:
        headers[TRACE_HEADER] = trace_id
    kwargs: dict[str, Any] = {"params": params, "headers": headers}
    if json is not None:
        import orjson
        kwargs["content"] = orjson.dumps(json)
        headers["Content-Type"] = content_type or "application/json"
    return client.build_request(method, path, **kwargs)


def retryable(method: str, response: httpx.Response | None,
              retried_uncertain: bool = False) -> bool:
    """Whether an attempt that got `response` (None: no answer) is tried again;
    `retried_uncertain`: an earlier attempt of this call may have reached the service."""
    if response is None:
        # Transport error: the request may have been applied. POSTs carry their key, GETs and
        # DELETEs are idempotent; a PATCH is not retried (no key; a replay could undo a
        # change someone made in between).
        return method != "PATCH"
    if response.status_code == 429:
        return True   # refused before any work: retried for every method
    if retried_uncertain and in_flight(response):
        # This call's own earlier attempt, under the same key, is still running on the
        # service: a later attempt gets its answer (a replay), so it is waited for.
        return True
    # A 503 may be a write Neo4j committed whose answer was lost (docs/audit.md): a PATCH
    # (no key) is not run again, as after a transport error.
    return response.status_code in RETRY_STATUSES and method != "PATCH"


def uncertain(response: httpx.Response | None) -> bool:
    """Whether an attempt that got this (None: no answer) may have done its work."""
    return response is None or response.status_code in UNCERTAIN_STATUSES


def delete_done(method: str, retried_uncertain: bool, response: httpx.Response) -> bool:
    """A DELETE retried after an attempt that may have deleted, answered 404: the token (or
    link) is gone, which is what the caller asked for; whether this call's earlier attempt
    removed it or it was already absent cannot be told, and either way it is not an error."""
    return method == "DELETE" and retried_uncertain and response.status_code == 404


def in_flight(response: httpx.Response) -> bool:
    """A 409 saying a request under the same Idempotency-Key is still being processed."""
    if response.status_code != 409:
        return False
    problem = problem_of(response)
    return (problem.get("type") == IN_FLIGHT_TYPE
            or problem.get("detail") == IN_FLIGHT_DETAIL)


def problem_of(response: httpx.Response) -> dict[str, Any]:
    """The answer's problem body, or {} when it has none."""
    try:
        problem = response.json()
    except ValueError:
        return {}
    return problem if isinstance(problem, dict) else {}


def raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    problem = problem_of(response)
    problem.setdefault("status", response.status_code)
    cls = error_for(response.status_code)
    raise cls(response.status_code, problem, response.headers.get(TRACE_HEADER),
              parse_retry_after(response.headers.get("Retry-After")))


def body(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    return response.json()


def page_params(*, size: int | None, start: str | None, ids=None, types=None,
                metadata: dict[str, str] | None = None, **extra) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    if size is not None:
        params.append(("size", str(size)))
    if start is not None:
        params.append(("start", start))
    params += [("id", i) for i in ids or ()]
    params += [("type", t) for t in types or ()]
    params += [(f"metadata.{k}", v) for k, v in (metadata or {}).items()]
    params += [(k, str(v)) for k, v in extra.items() if v is not None]
    return params


__all__ = ["API_KEY_HEADER", "MERGE_PATCH", "NO_RETRIES", "TRACE_HEADER", "ApiError",
           "RetryPolicy"]
