"""The `Idempotency-Key` middleware (docs/bulk-and-idempotency.md): on every POST that carries
the header, after authentication (entries are per application) and rate limiting.

The first request under a key runs and its response is kept; a retry with the same request is
answered with that response and `Idempotent-Replayed: true`; the rules themselves are in
`services/idempotency.py`. A route that only reads (`Endpoint.reads_only`) ignores the header.
The kept answer is encrypted under the tenant's key; a field the service stores only as a
digest (`Endpoint.shown_once`: a new API key) is left out of it, so a replay answers without
it. A webhook's secret, stored encrypted under the same key anyway, is kept and replayed."""

from __future__ import annotations

import logging

import orjson
from aiohttp import web
from marshmallow import ValidationError

from ..errors import VaultError
from ..services.idempotency import HEADER, Replay, check_key
from . import problems
from .endpoints import ATTR, Endpoint
from .request_io import read_body
from .typedefs import PRINCIPAL, services_key

log = logging.getLogger(__name__)
REPLAYED = "Idempotent-Replayed"


@web.middleware
async def idempotency(request: web.Request, handler) -> web.StreamResponse:
    principal = request.get(PRINCIPAL)
    if request.method != "POST" or principal is None or HEADER not in request.headers:
        return await handler(request)
    endpoint: Endpoint | None = getattr(request.match_info.handler, ATTR, None)
    if endpoint is not None and endpoint.reads_only:
        return await handler(request)  # nothing to repeat or to guard: it runs again
    key = check_key(request.headers.getall(HEADER))
    service = request.app[services_key].idempotency
    outcome = await service.begin(principal, key, method=request.method,
                                  target=request.rel_url.raw_path_qs,
                                  body=await read_body(request))
    if isinstance(outcome, Replay):
        response = web.Response(status=outcome.status, body=outcome.body,
                                headers={REPLAYED: "true"})
        if outcome.content_type:
            response.content_type = outcome.content_type
        return response
    response = None
    refused = False
    try:
        response = await handler(request)
    except (VaultError, ValidationError) as exc:
        refused = _refusal(exc)
        raise
    finally:
        kept = response if isinstance(response, web.Response) else None
        body = None
        if kept is not None:  # a 204 (a link already there) is an answer too: empty
            body = kept.body if isinstance(kept.body, bytes) else (
                b"" if kept.body is None else None)
        if body and endpoint is not None and endpoint.shown_once:
            body = _without(body, endpoint.shown_once)
        try:
            await service.finish(principal, outcome, status=kept.status if kept else None,
                                 content_type=kept.content_type if kept else None,
                                 body=body, refused=refused)
        except VaultError as exc:
            # The request's own work is done: answer it. Its key stays held until the lease
            # runs out; a retry meanwhile is a 409.
            log.warning("idempotency entry not completed", extra={"error": type(exc).__name__})
    return response


def _refusal(exc: Exception) -> bool:
    """A client error (4xx but 429) raised by the handler: the request was refused."""
    if isinstance(exc, ValidationError):
        return True
    status = problems.from_error(exc).status
    return 400 <= status < 500 and status != 429


def _without(body: bytes, fields: tuple[str, ...]) -> bytes:
    """The JSON answer without `fields` (what is shown once): a replay answers without them."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(answer, dict):
        return body
    return orjson.dumps({k: v for k, v in answer.items() if k not in fields})
