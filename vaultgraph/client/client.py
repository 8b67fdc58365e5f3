"""vaultgraph.client: the REST API from Python, sync (`Client`) and async (`AsyncClient`).

    from vaultgraph.client import Client
    with Client("http://127.0.0.1:8080", api_key="vg_…") as vg:
        card = vg.create_token("card", {"number": "4242424242424242"}, id="card-1")
        vg.link("cust-ada", "card-1")
        graph = vg.graph("cust-ada", depth=2)

Every method maps to one route; errors raise vaultgraph.client.errors.ApiError subclasses.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx

from . import _core
from ._core import MERGE_PATCH, RetryPolicy
from .errors import TransportError
from .types import (
    AuditPage,
    Direction,
    Graph,
    Link,
    Proxy,
    ProxyPage,
    ProxyResponse,
    Token,
    TokenPage,
)

DEFAULT_TIMEOUT = 10.0
# The vault's limit on a call through a proxy, from its start to the answer's last byte
# (docs/proxy.md; CALL_TIME_LIMIT in vaultgraph/services/proxy.py). By default `proxy()` waits
# that long and a margin for the vault's own work around it, so that the answer comes — the
# destination's, or the vault's 502 saying it did not come in time — before the client gives
# up: a call the client gave up on may still have reached the destination.
PROXY_CALL_LIMIT = 30.0
PROXY_TIMEOUT = PROXY_CALL_LIMIT + 5.0


class _Unset:
    """A timeout the caller did not give (None is one: no timeout)."""

    def __repr__(self) -> str:
        return "unset"


UNSET: Any = _Unset()


def _timeouts(timeout: Any) -> tuple[Any, Any]:
    """The timeout of the API's calls and of calls through a proxy: what the caller gave, for
    both; else the defaults."""
    if timeout is UNSET:
        return DEFAULT_TIMEOUT, PROXY_TIMEOUT
    return timeout, timeout


def _p(token_id: str) -> str:
    return quote(token_id, safe="")


def _create_body(type: str, data: Any, id: str | None, fields: dict[str, Any]) -> dict:
    body: dict[str, Any] = {"type": type, "data": data, **fields}
    if id is not None:
        body["id"] = id
    return body


class _Routes:
    """Each route as (method, path, options): the same for both clients."""

    @staticmethod
    def create_token(type, data, id, fields):
        return "POST", "/tokens", {"json": _create_body(type, data, id, fields)}

    @staticmethod
    def get_token(token_id):
        return "GET", f"/tokens/{_p(token_id)}", {}

    @staticmethod
    def list_tokens(size, start, ids, types, metadata):
        return "GET", "/tokens", {"params": _core.page_params(
            size=size, start=start, ids=ids, types=types, metadata=metadata)}

    @staticmethod
    def update_token(token_id, patch):
        return "PATCH", f"/tokens/{_p(token_id)}", {"json": patch, "content_type": MERGE_PATCH}

    @staticmethod
    def delete_token(token_id):
        return "DELETE", f"/tokens/{_p(token_id)}", {}

    @staticmethod
    def create_child(parent_id, type, data, id, fields):
        return ("POST", f"/tokens/{_p(parent_id)}/children",
                {"json": _create_body(type, data, id, fields)})

    @staticmethod
    def children(parent_id, size, start, ids, types):
        return "GET", f"/tokens/{_p(parent_id)}/children", {"params": _core.page_params(
            size=size, start=start, ids=ids, types=types)}

    @staticmethod
    def parents(token_id, size, start, ids, types):
        return "GET", f"/tokens/{_p(token_id)}/parents", {"params": _core.page_params(
            size=size, start=start, ids=ids, types=types)}

    @staticmethod
    def link(parent_id, child_id):
        return "POST", f"/tokens/{_p(parent_id)}/children/{_p(child_id)}", {}

    @staticmethod
    def unlink(parent_id, child_id):
        return "DELETE", f"/tokens/{_p(parent_id)}/children/{_p(child_id)}", {}

    @staticmethod
    def graph(token_id, depth, direction):
        return "GET", f"/tokens/{_p(token_id)}/graph", {"params": _core.page_params(
            size=None, start=None, depth=depth, direction=direction)}

    @staticmethod
    def search(query, size, start):
        body = {"query": query, **({"size": size} if size is not None else {}),
                **({"start": start} if start is not None else {})}
        return "POST", "/tokens/search", {"json": body}

    @staticmethod
    def tokenize(items):
        return "POST", "/tokenize", {"json": items}

    @staticmethod
    def detokenize(payload):
        return "POST", "/detokenize", {"json": payload}

    @staticmethod
    def logs(size, start, filters):
        return "GET", "/logs", {"params": _core.page_params(size=size, start=start, **filters)}

    @staticmethod
    def create_proxy(name, destination_url, fields):
        return "POST", "/proxies", {"json": {"name": name, "destination_url": destination_url,
                                             **fields}}

    @staticmethod
    def get_proxy(proxy_id):
        return "GET", f"/proxies/{_p(proxy_id)}", {}

    @staticmethod
    def list_proxies(size, start):
        return "GET", "/proxies", {"params": _core.page_params(size=size, start=start)}

    @staticmethod
    def update_proxy(proxy_id, patch):
        return "PATCH", f"/proxies/{_p(proxy_id)}", {"json": patch, "content_type": MERGE_PATCH}

    @staticmethod
    def delete_proxy(proxy_id):
        return "DELETE", f"/proxies/{_p(proxy_id)}", {}


    @staticmethod
    def create_webhook(url, events, containers, description):
        body: dict[str, Any] = {"url": url, "events": list(events)}
        if containers is not None:
            body["containers"] = list(containers)
        if description is not None:
            body["description"] = description
        return "POST", "/webhooks", {"json": body}

    @staticmethod
    def list_webhooks(size, start):
        return "GET", "/webhooks", {"params": _core.page_params(size=size, start=start)}

    @staticmethod
    def get_webhook(webhook_id):
        return "GET", f"/webhooks/{_p(webhook_id)}", {}

    @staticmethod
    def update_webhook(webhook_id, patch):
        return ("PATCH", f"/webhooks/{_p(webhook_id)}",
                {"json": patch, "content_type": MERGE_PATCH})

    @staticmethod
    def delete_webhook(webhook_id):
        return "DELETE", f"/webhooks/{_p(webhook_id)}", {}

    @staticmethod
    def rotate_webhook_secret(webhook_id):
        return "POST", f"/webhooks/{_p(webhook_id)}/secret", {}

    @staticmethod
    def test_webhook(webhook_id):
        return "POST", f"/webhooks/{_p(webhook_id)}/test", {}

    @staticmethod
    def webhook_deliveries(webhook_id, size, start):
        return "GET", f"/webhooks/{_p(webhook_id)}/deliveries", {
            "params": _core.page_params(size=size, start=start)}

    @staticmethod
    def retry_webhook_delivery(webhook_id, event_id):
        return "POST", f"/webhooks/{_p(webhook_id)}/deliveries/{_p(event_id)}/retry", {}


PROXY_STATUS = "SVC-PROXY-STATUS"   # `forwarded` on the destination's answer (docs/proxy.md)
# The client's own headers a proxied call keeps: the API key is the vault's (never forwarded),
# and Accept-Encoding and Connection concern the connection to the vault (never forwarded
# either). Its other defaults (Accept, User-Agent) are the client's, not the caller's: the vault
# would forward them to the destination, so a call carries them only when the caller gives them.
_PROXY_KEEPS = frozenset({_core.API_KEY_HEADER.lower(), "accept-encoding", "connection"})


def _proxy_request(http: httpx.Client | httpx.AsyncClient, proxy_id: str, method: str,
                   path: str, json: Any, content: bytes | str | None,
                   headers: dict[str, str] | None, params: Any, timeout: Any) -> httpx.Request:
    """A call through a proxy: the caller's headers and none of the client's defaults (no
    Idempotency-Key of its own either: the caller's, if any, goes to the destination) and a
    body sent as given, JSON or not."""
    given = httpx.Headers(headers or {})
    kwargs: dict[str, Any] = {"params": params, "headers": given.copy()}
    if json is not None:
        import orjson
        kwargs["content"] = orjson.dumps(json)
        kwargs["headers"].setdefault("Content-Type", "application/json")
    elif content is not None:
        kwargs["content"] = content
    target = f"/proxy/{_p(proxy_id)}/{quote(path.lstrip('/'), safe='/')}"
    request = http.build_request(method.upper(), target, timeout=timeout, **kwargs)
    for name in http.headers:
        if name.lower() not in _PROXY_KEEPS and name not in given:
            del request.headers[name]
    return request


def _vault_refused(response: httpx.Response) -> bool:
    """The vault's own 429 (its rate limit, or no place among the tenant's calls in flight):
    nothing was sent to the destination. A forwarded answer is never this, whatever its
    status: the destination got the call."""
    return (response.status_code == 429
            and response.headers.get(PROXY_STATUS) != "forwarded")


def _proxy_answer(response: httpx.Response) -> ProxyResponse:
    if response.headers.get(PROXY_STATUS) != "forwarded":
        _core.raise_for(response)   # the vault's own answer: a refusal or a 502
    return ProxyResponse(response.status_code, response.headers.get("Content-Type"),
                         response.content)


def _headers(api_key: str) -> dict[str, str]:
    return {_core.API_KEY_HEADER: api_key, "Accept": "application/json"}


class Client:
    """The synchronous client (httpx.Client underneath; pass `transport=` to reuse one)."""

    def __init__(self, base_url: str, api_key: str, *,
                 timeout: float | httpx.Timeout | None = UNSET,
                 retry: RetryPolicy | None = None, sleep: Callable[[float], None] = time.sleep,
                 transport: httpx.BaseTransport | None = None):
        timeout, self._proxy_timeout = _timeouts(timeout)
        self._http = httpx.Client(base_url=base_url, headers=_headers(api_key),
                                  timeout=timeout, transport=transport)
        self.retry = retry or RetryPolicy()
        self._sleep = sleep

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, *, idempotency_key: str | None = None,
              trace_id: str | None = None, **options) -> Any:
        if method == "POST":
            idempotency_key = idempotency_key or str(uuid.uuid4())
        request = _core.build_request(self._http, method, path, idempotency_key=idempotency_key,
                                      trace_id=trace_id, **options)
        retried_uncertain = False   # an earlier attempt may have done the work
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                response = self._http.send(request)
            except httpx.TransportError as exc:
                if last or not _core.retryable(method, None):
                    raise TransportError(f"{method} {path}: {type(exc).__name__}") from exc
                retried_uncertain = True
                self._sleep(self.retry.wait(attempt, None))
                continue
            if _core.delete_done(method, retried_uncertain, response):
                return None
            if not last and _core.retryable(method, response, retried_uncertain):
                retried_uncertain = retried_uncertain or _core.uncertain(response)
                self._sleep(self.retry.wait(
                    attempt, _core.parse_retry_after(response.headers.get("Retry-After"))))
                continue
            _core.raise_for(response)
            return _core.body(response)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- tokens ---------------------------------------------------------------------------

    def create_token(self, type: str, data: Any, *, id: str | None = None,
                     idempotency_key: str | None = None, **fields: Any) -> Token:
        """POST /tokens. `fields`: containers, metadata, mask, expires_at,
        fingerprint_expression, search_indexes, deduplicate… as the API names them."""
        m, p, o = _Routes.create_token(type, data, id, fields)
        return self._send(m, p, idempotency_key=idempotency_key, **o)

    def get_token(self, token_id: str) -> Token:
        m, p, o = _Routes.get_token(token_id)
        return self._send(m, p, **o)

    def list_tokens(self, *, size: int | None = None, start: str | None = None,
                    ids: list[str] | None = None, types: list[str] | None = None,
                    metadata: dict[str, str] | None = None) -> TokenPage:
        m, p, o = _Routes.list_tokens(size, start, ids, types, metadata)
        return self._send(m, p, **o)

    def iter_tokens(self, **filters: Any) -> Iterator[Token]:
        """Every token the filters select, page after page."""
        start = None
        while True:
            page = self.list_tokens(start=start, **filters)
            yield from page["data"]
            start = page["pagination"]["next"]
            if start is None:
                return

    def update_token(self, token_id: str, patch: dict[str, Any]) -> Token:
        """PATCH /tokens/{id} with a JSON merge patch (null removes a key)."""
        m, p, o = _Routes.update_token(token_id, patch)
        return self._send(m, p, **o)

    def delete_token(self, token_id: str) -> None:
        """DELETE /tokens/{id}. Retried after a lost answer, a 404 on the retry means the token
        is gone and returns normally (it may have been this call that deleted it)."""
        m, p, o = _Routes.delete_token(token_id)
        self._send(m, p, **o)

    # -- the graph ------------------------------------------------------------------------

    def create_child(self, parent_id: str, type: str, data: Any, *, id: str | None = None,
                     idempotency_key: str | None = None, **fields: Any) -> Token:
        m, p, o = _Routes.create_child(parent_id, type, data, id, fields)
        return self._send(m, p, idempotency_key=idempotency_key, **o)

    def children(self, parent_id: str, *, size: int | None = None, start: str | None = None,
                 ids: list[str] | None = None, types: list[str] | None = None) -> TokenPage:
        m, p, o = _Routes.children(parent_id, size, start, ids, types)
        return self._send(m, p, **o)

    def parents(self, token_id: str, *, size: int | None = None, start: str | None = None,
                ids: list[str] | None = None, types: list[str] | None = None) -> TokenPage:
        m, p, o = _Routes.parents(token_id, size, start, ids, types)
        return self._send(m, p, **o)

    def link(self, parent_id: str, child_id: str, *,
             idempotency_key: str | None = None) -> Link | None:
        """POST /tokens/{parent}/children/{child}: the link, or None when it already existed."""
        m, p, o = _Routes.link(parent_id, child_id)
        return self._send(m, p, idempotency_key=idempotency_key, **o)

    def unlink(self, parent_id: str, child_id: str) -> None:
        """DELETE /tokens/{parent}/children/{child}; a 404 on a retry is done, as for
        `delete_token`."""
        m, p, o = _Routes.unlink(parent_id, child_id)
        self._send(m, p, **o)

    def graph(self, token_id: str, *, depth: int | None = None,
              direction: Direction | None = None) -> Graph:
        """GET /tokens/{id}/graph: the readable tokens within `depth` links, and their links."""
        m, p, o = _Routes.graph(token_id, depth, direction)
        return self._send(m, p, **o)

    # -- search and the audit trail --------------------------------------------------------

    def search(self, query: str, *, size: int | None = None,
               start: str | None = None) -> TokenPage:
        """POST /tokens/search (docs/search.md), e.g. `type:card AND descendant:cust-1`."""
        m, p, o = _Routes.search(query, size, start)
        return self._send(m, p, **o)

    def tokenize(self, items: list[dict] | dict[str, dict], *,
                 idempotency_key: str | None = None) -> Any:
        """POST /tokenize: create requests as a list or an object; the answer has the same
        shape, each place a token or that item's problem (docs/bulk-and-idempotency.md)."""
        m, p, o = _Routes.tokenize(items)
        return self._send(m, p, idempotency_key=idempotency_key, **o)

    def detokenize(self, payload: Any) -> Any:
        """POST /detokenize: `payload` with every `{{ token_id }}` string replaced by the
        token's data as the caller may see it."""
        m, p, o = _Routes.detokenize(payload)
        return self._send(m, p, **o)

    def logs(self, *, size: int | None = None, start: str | None = None,
             **filters: str) -> AuditPage:
        """GET /logs: `token_id`, `application_id`, `operation`, `outcome`, `start_date`,
        `end_date` (docs/audit.md)."""
        m, p, o = _Routes.logs(size, start, filters)
        return self._send(m, p, **o)

    # -- outbound proxies -------------------------------------------------------------------

    def create_proxy(self, name: str, destination_url: str, *,
                     idempotency_key: str | None = None, **fields: Any) -> Proxy:
        """POST /proxies. `fields`: description, header_allowlist (docs/proxy.md)."""
        m, p, o = _Routes.create_proxy(name, destination_url, fields)
        return self._send(m, p, idempotency_key=idempotency_key, **o)

    def get_proxy(self, proxy_id: str) -> Proxy:
        m, p, o = _Routes.get_proxy(proxy_id)
        return self._send(m, p, **o)

    def list_proxies(self, *, size: int | None = None, start: str | None = None) -> ProxyPage:
        m, p, o = _Routes.list_proxies(size, start)
        return self._send(m, p, **o)

    def update_proxy(self, proxy_id: str, patch: dict[str, Any]) -> Proxy:
        """PATCH /proxies/{id} with a JSON merge patch."""
        m, p, o = _Routes.update_proxy(proxy_id, patch)
        return self._send(m, p, **o)

    def delete_proxy(self, proxy_id: str) -> None:
        m, p, o = _Routes.delete_proxy(proxy_id)
        return self._send(m, p, **o)

    def proxy(self, proxy_id: str, method: str, path: str = "", *, json: Any = None,
              content: bytes | str | None = None, headers: dict[str, str] | None = None,
              params: Any = None, timeout: float | httpx.Timeout | None = UNSET
              ) -> ProxyResponse:
        """Call the proxy's destination: `method` on destination_url + `/path`, the body's
        `{{ token_id }}` expressions replaced by the vault (never seen here). The destination's
        answer whatever its status; the vault's refusals raise. Sent once: a call may have
        reached the destination, so it is retried only when the vault itself refused it (a 429
        without `SVC-PROXY-STATUS: forwarded`); the destination's own 429 is its answer. It
        carries the caller's `headers`, none of the client's defaults (Accept, User-Agent).
        `timeout`: this call's, else the client's if one was given to it, else
        `PROXY_TIMEOUT` (the vault's own 30 s limit on a call and a margin)."""
        request = _proxy_request(self._http, proxy_id, method, path, json, content, headers,
                                 params, self._proxy_timeout if timeout is UNSET else timeout)
        for attempt in range(self.retry.attempts):
            try:
                response = self._http.send(request)
            except httpx.TransportError as exc:
                raise TransportError(f"{method} proxy {proxy_id}: {type(exc).__name__}") from exc
            if _vault_refused(response) and attempt < self.retry.attempts - 1:
                self._sleep(self.retry.wait(
                    attempt, _core.parse_retry_after(response.headers.get("Retry-After"))))
                continue
            return _proxy_answer(response)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- webhooks (docs/webhooks.md) ------------------------------------------------------------

    def create_webhook(self, url: str, *, events: list[str], containers: list[str] | None = None,
                       description: str | None = None,
                       idempotency_key: str | None = None) -> dict:
        """POST /webhooks: the webhook with its `secret` (shown in this answer only)."""
        m, p, o = _Routes.create_webhook(url, events, containers, description)
        return self._send(m, p, idempotency_key=idempotency_key, **o)

    def list_webhooks(self, *, size: int | None = None, start: str | None = None) -> dict:
        m, p, o = _Routes.list_webhooks(size, start)
        return self._send(m, p, **o)

    def get_webhook(self, webhook_id: str) -> dict:
        m, p, o = _Routes.get_webhook(webhook_id)
        return self._send(m, p, **o)

    def update_webhook(self, webhook_id: str, patch: dict[str, Any]) -> dict:
        """PATCH /webhooks/{id}: a merge patch of url, events, containers, description, status."""
        m, p, o = _Routes.update_webhook(webhook_id, patch)
        return self._send(m, p, **o)

    def delete_webhook(self, webhook_id: str) -> None:
        m, p, o = _Routes.delete_webhook(webhook_id)
        return self._send(m, p, **o)

    def rotate_webhook_secret(self, webhook_id: str, *, idempotency_key: str | None = None) -> dict:
        """POST /webhooks/{id}/secret: the new secret; the old one signs for 24 h more."""
        m, p, o = _Routes.rotate_webhook_secret(webhook_id)
        return self._send(m, p, idempotency_key=idempotency_key, **o)

    def test_webhook(self, webhook_id: str, *, idempotency_key: str | None = None) -> dict:
        """POST /webhooks/{id}/test: queues a `webhook.test` event; its `event_id`."""
        m, p, o = _Routes.test_webhook(webhook_id)
        return self._send(m, p, idempotency_key=idempotency_key, **o)

    def webhook_deliveries(self, webhook_id: str, *, size: int | None = None,
                           start: str | None = None) -> dict:
        """GET /webhooks/{id}/deliveries: attempts, newest first."""
        m, p, o = _Routes.webhook_deliveries(webhook_id, size, start)
        return self._send(m, p, **o)

    def retry_webhook_delivery(self, webhook_id: str, event_id: str, *,
                               idempotency_key: str | None = None) -> dict:
        """POST /webhooks/{id}/deliveries/{event_id}/retry: the event is sent again now (held
        while the webhook is disabled); its `event_id` and `state`."""
        m, p, o = _Routes.retry_webhook_delivery(webhook_id, event_id)
        return self._send(m, p, idempotency_key=idempotency_key, **o)


class AsyncClient:
    """The asynchronous client (httpx.AsyncClient underneath); the same methods, awaited."""

    def __init__(self, base_url: str, api_key: str, *,
                 timeout: float | httpx.Timeout | None = UNSET,
                 retry: RetryPolicy | None = None, sleep: Callable[[float], Any] = asyncio.sleep,
                 transport: httpx.AsyncBaseTransport | None = None):
        timeout, self._proxy_timeout = _timeouts(timeout)
        self._http = httpx.AsyncClient(base_url=base_url, headers=_headers(api_key),
                                       timeout=timeout, transport=transport)
        self.retry = retry or RetryPolicy()
        self._sleep = sleep

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, *, idempotency_key: str | None = None,
                    trace_id: str | None = None, **options) -> Any:
        if method == "POST":
            idempotency_key = idempotency_key or str(uuid.uuid4())
        request = _core.build_request(self._http, method, path, idempotency_key=idempotency_key,
                                      trace_id=trace_id, **options)
        retried_uncertain = False   # an earlier attempt may have done the work
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                response = await self._http.send(request)
            except httpx.TransportError as exc:
                if last or not _core.retryable(method, None):
                    raise TransportError(f"{method} {path}: {type(exc).__name__}") from exc
                retried_uncertain = True
                await self._sleep(self.retry.wait(attempt, None))
                continue
            if _core.delete_done(method, retried_uncertain, response):
                return None
            if not last and _core.retryable(method, response, retried_uncertain):
                retried_uncertain = retried_uncertain or _core.uncertain(response)
                await self._sleep(self.retry.wait(
                    attempt, _core.parse_retry_after(response.headers.get("Retry-After"))))
                continue
            _core.raise_for(response)
            return _core.body(response)
        raise AssertionError("unreachable")  # pragma: no cover

    async def create_token(self, type: str, data: Any, *, id: str | None = None,
                           idempotency_key: str | None = None, **fields: Any) -> Token:
        m, p, o = _Routes.create_token(type, data, id, fields)
        return await self._send(m, p, idempotency_key=idempotency_key, **o)

    async def get_token(self, token_id: str) -> Token:
        m, p, o = _Routes.get_token(token_id)
        return await self._send(m, p, **o)

    async def list_tokens(self, *, size: int | None = None, start: str | None = None,
                          ids: list[str] | None = None, types: list[str] | None = None,
                          metadata: dict[str, str] | None = None) -> TokenPage:
        m, p, o = _Routes.list_tokens(size, start, ids, types, metadata)
        return await self._send(m, p, **o)

    async def iter_tokens(self, **filters: Any) -> AsyncIterator[Token]:
        start = None
        while True:
            page = await self.list_tokens(start=start, **filters)
            for token in page["data"]:
                yield token
            start = page["pagination"]["next"]
            if start is None:
                return

    async def update_token(self, token_id: str, patch: dict[str, Any]) -> Token:
        m, p, o = _Routes.update_token(token_id, patch)
        return await self._send(m, p, **o)

    async def delete_token(self, token_id: str) -> None:
        m, p, o = _Routes.delete_token(token_id)
        await self._send(m, p, **o)

    async def create_child(self, parent_id: str, type: str, data: Any, *, id: str | None = None,
                           idempotency_key: str | None = None, **fields: Any) -> Token:
        m, p, o = _Routes.create_child(parent_id, type, data, id, fields)
        return await self._send(m, p, idempotency_key=idempotency_key, **o)

    async def children(self, parent_id: str, *, size: int | None = None,
                       start: str | None = None, ids: list[str] | None = None,
                       types: list[str] | None = None) -> TokenPage:
        m, p, o = _Routes.children(parent_id, size, start, ids, types)
        return await self._send(m, p, **o)

    async def parents(self, token_id: str, *, size: int | None = None, start: str | None = None,
                      ids: list[str] | None = None, types: list[str] | None = None) -> TokenPage:
        m, p, o = _Routes.parents(token_id, size, start, ids, types)
        return await self._send(m, p, **o)

    async def link(self, parent_id: str, child_id: str, *,
                   idempotency_key: str | None = None) -> Link | None:
        m, p, o = _Routes.link(parent_id, child_id)
        return await self._send(m, p, idempotency_key=idempotency_key, **o)

    async def unlink(self, parent_id: str, child_id: str) -> None:
        m, p, o = _Routes.unlink(parent_id, child_id)
        await self._send(m, p, **o)

    async def graph(self, token_id: str, *, depth: int | None = None,
                    direction: Direction | None = None) -> Graph:
        m, p, o = _Routes.graph(token_id, depth, direction)
        return await self._send(m, p, **o)

    # -- search and the audit trail --------------------------------------------------------

    async def search(self, query: str, *, size: int | None = None,
                     start: str | None = None) -> TokenPage:
        m, p, o = _Routes.search(query, size, start)
        return await self._send(m, p, **o)

    async def tokenize(self, items: list[dict] | dict[str, dict], *,
                       idempotency_key: str | None = None) -> Any:
        m, p, o = _Routes.tokenize(items)
        return await self._send(m, p, idempotency_key=idempotency_key, **o)

    async def detokenize(self, payload: Any) -> Any:
        m, p, o = _Routes.detokenize(payload)
        return await self._send(m, p, **o)

    async def logs(self, *, size: int | None = None, start: str | None = None,
                   **filters: str) -> AuditPage:
        m, p, o = _Routes.logs(size, start, filters)
        return await self._send(m, p, **o)

    async def create_proxy(self, name: str, destination_url: str, *,
                           idempotency_key: str | None = None, **fields: Any) -> Proxy:
        m, p, o = _Routes.create_proxy(name, destination_url, fields)
        return await self._send(m, p, idempotency_key=idempotency_key, **o)

    async def get_proxy(self, proxy_id: str) -> Proxy:
        m, p, o = _Routes.get_proxy(proxy_id)
        return await self._send(m, p, **o)

    async def list_proxies(self, *, size: int | None = None,
                           start: str | None = None) -> ProxyPage:
        m, p, o = _Routes.list_proxies(size, start)
        return await self._send(m, p, **o)

    async def update_proxy(self, proxy_id: str, patch: dict[str, Any]) -> Proxy:
        m, p, o = _Routes.update_proxy(proxy_id, patch)
        return await self._send(m, p, **o)

    async def delete_proxy(self, proxy_id: str) -> None:
        m, p, o = _Routes.delete_proxy(proxy_id)
        return await self._send(m, p, **o)

    async def proxy(
            self, proxy_id: str, method: str, path: str = "", *, json: Any = None,
            content: bytes | str | None = None, headers: dict[str, str] | None = None,
            params: Any = None,
            timeout: float | httpx.Timeout | None = UNSET,  # noqa: ASYNC109 - httpx's, per request
            ) -> ProxyResponse:
        request = _proxy_request(self._http, proxy_id, method, path, json, content, headers,
                                 params, self._proxy_timeout if timeout is UNSET else timeout)
        for attempt in range(self.retry.attempts):
            try:
                response = await self._http.send(request)
            except httpx.TransportError as exc:
                raise TransportError(f"{method} proxy {proxy_id}: {type(exc).__name__}") from exc
            if _vault_refused(response) and attempt < self.retry.attempts - 1:
                await self._sleep(self.retry.wait(
                    attempt, _core.parse_retry_after(response.headers.get("Retry-After"))))
                continue
            return _proxy_answer(response)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- webhooks (docs/webhooks.md) ------------------------------------------------------------

    async def create_webhook(self, url: str, *, events: list[str],
                             containers: list[str] | None = None,
                             description: str | None = None,
                             idempotency_key: str | None = None) -> dict:
        """POST /webhooks: the webhook with its `secret` (shown in this answer only)."""
        m, p, o = _Routes.create_webhook(url, events, containers, description)
        return await self._send(m, p, idempotency_key=idempotency_key, **o)

    async def list_webhooks(self, *, size: int | None = None,
                            start: str | None = None) -> dict:
        m, p, o = _Routes.list_webhooks(size, start)
        return await self._send(m, p, **o)

    async def get_webhook(self, webhook_id: str) -> dict:
        m, p, o = _Routes.get_webhook(webhook_id)
        return await self._send(m, p, **o)

    async def update_webhook(self, webhook_id: str, patch: dict[str, Any]) -> dict:
        """PATCH /webhooks/{id}: a merge patch of url, events, containers, description, status."""
        m, p, o = _Routes.update_webhook(webhook_id, patch)
        return await self._send(m, p, **o)

    async def delete_webhook(self, webhook_id: str) -> None:
        m, p, o = _Routes.delete_webhook(webhook_id)
        return await self._send(m, p, **o)

    async def rotate_webhook_secret(self, webhook_id: str, *,
                                    idempotency_key: str | None = None) -> dict:
        """POST /webhooks/{id}/secret: the new secret; the old one signs for 24 h more."""
        m, p, o = _Routes.rotate_webhook_secret(webhook_id)
        return await self._send(m, p, idempotency_key=idempotency_key, **o)

    async def test_webhook(self, webhook_id: str, *,
                           idempotency_key: str | None = None) -> dict:
        """POST /webhooks/{id}/test: queues a `webhook.test` event; its `event_id`."""
        m, p, o = _Routes.test_webhook(webhook_id)
        return await self._send(m, p, idempotency_key=idempotency_key, **o)

    async def webhook_deliveries(self, webhook_id: str, *, size: int | None = None,
                                 start: str | None = None) -> dict:
        """GET /webhooks/{id}/deliveries: attempts, newest first."""
        m, p, o = _Routes.webhook_deliveries(webhook_id, size, start)
        return await self._send(m, p, **o)

    async def retry_webhook_delivery(self, webhook_id: str, event_id: str, *,
                                     idempotency_key: str | None = None) -> dict:
        """POST /webhooks/{id}/deliveries/{event_id}/retry: the event is sent again now (held
        while the webhook is disabled); its `event_id` and `state`."""
        m, p, o = _Routes.retry_webhook_delivery(webhook_id, event_id)
        return await self._send(m, p, idempotency_key=idempotency_key, **o)
