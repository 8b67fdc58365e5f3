"""Rate limits (docs/bulk-and-idempotency.md): a token bucket per application, and one per client
address for failed authentications. The buckets are in `services/ratelimits.py`.

The `access` middleware (api/middleware.py) applies both. The failed-authentication throttle
comes before authentication: an address over its failure budget gets 429 before its key is
looked up. A request spends one token before the look-up (requests sent at once must not all
pass a check made before any of them failed) and gets it back once the key is good; a 401 keeps
it spent (the 401 itself is unchanged). See services/ratelimits.py FailedAuthentications.
The application's bucket is charged (`charge`) right after authentication and before any
decision about the request (its permission, its body, the token it names): each authenticated
request spends one of its application's tokens, so a refusal (403, 404, 400…), which still
writes an audit event, is paid for like an answer. A handler whose request weighs more (a search
of many terms) spends the rest with `charge(request, cost)`. Every answer to an authenticated
request carries `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (added as the
response is prepared, so problem answers and 429s carry them too)."""

from __future__ import annotations

from typing import NoReturn

from aiohttp import web

from .. import metrics
from ..errors import RateLimited
from ..services.ratelimits import Verdict
from .typedefs import PRINCIPAL, services_key

RATE_LIMIT: web.RequestKey[Verdict] = web.RequestKey("rate_limit")
FAILED_AUTH = "Too many failed authentications from this address; retry later."
OVER_LIMIT = "The application is over its rate limit; retry after the time in Retry-After."


def refuse_failed_auth(verdict: Verdict) -> NoReturn:
    """The address is over its failed-authentication budget: 429, before its key is looked
    up."""
    metrics.RATE_LIMITED.labels(limit="client_address").inc()
    raise RateLimited(FAILED_AUTH, retry_after=verdict.retry_after)


def charge(request: web.Request, cost: int = 1) -> None:
    """Spend `cost` units of the authenticated application's bucket, or raise `RateLimited`
    (429) spending none. The middleware charges each request one unit before anything is
    decided; a handler charges what its request weighs beyond that. The RateLimit-* headers
    show the bucket after the last charge. A request's whole weight is at most a full bucket (or
    it could never pass). Nothing to do on a public route or with limits off."""
    principal = request.get(PRINCIPAL)
    buckets = request.app[services_key].rate_limits.applications
    cost = min(cost, buckets.burst - 1)  # with the unit the middleware took: a full bucket
    if principal is None or not buckets.enabled or cost <= 0:
        return
    verdict = buckets.take(principal.application_id, cost)
    request[RATE_LIMIT] = verdict
    if not verdict.allowed:
        metrics.RATE_LIMITED.labels(limit="application").inc()
        raise RateLimited(OVER_LIMIT, retry_after=verdict.retry_after)


async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: the RateLimit-* headers of the request's application."""
    verdict = request.get(RATE_LIMIT)
    if verdict is None:
        return
    response.headers["RateLimit-Limit"] = str(verdict.limit)
    response.headers["RateLimit-Remaining"] = str(verdict.remaining)
    response.headers["RateLimit-Reset"] = str(verdict.reset)
