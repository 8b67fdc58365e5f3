"""The `Idempotency-Key` middleware (README "Idempotent retries"): on every POST that carries
the header, after authentication (entries are per application) and rate limiting.

The first request under a key runs and its response is kept; a retry with the same request is
answered with that response and `Idempotent-Replayed: true`; the rules themselves are in
`services/idempotency.py`."""

from __future__ import annotations

import logging

from aiohttp import web

from ..errors import VaultError
from ..services.idempotency import HEADER, Replay, check_key
from .typedefs import PRINCIPAL, services_key

log = logging.getLogger(__name__)
REPLAYED = "Idempotent-Replayed"


@web.middleware
async def idempotency(request: web.Request, handler) -> web.StreamResponse:
    principal = request.get(PRINCIPAL)
    if request.method != "POST" or principal is None or HEADER not in request.headers:
        return await handler(request)
    key = check_key(request.headers.getall(HEADER))
    service = request.app[services_key].idempotency
    outcome = await service.begin(principal, key, method=request.method,
                                  target=request.rel_url.raw_path_qs, body=await request.read())
    if isinstance(outcome, Replay):
        response = web.Response(status=outcome.status, body=outcome.body,
                                headers={REPLAYED: "true"})
        if outcome.content_type:
            response.content_type = outcome.content_type
        return response
    response = None
    try:
        response = await handler(request)
    finally:
        kept = response if isinstance(response, web.Response) else None
        body = kept.body if kept is not None and isinstance(kept.body, bytes) else None
        try:
            await service.finish(principal, outcome, status=kept.status if kept else None,
                                 content_type=kept.content_type if kept else None,
                                 body=body)
        except VaultError as exc:
            # The request's own work is done: answer it. Its key stays held until the lease
            # runs out; a retry meanwhile is a 409.
            log.warning("idempotency entry not completed", extra={"error": type(exc).__name__})
    return response
