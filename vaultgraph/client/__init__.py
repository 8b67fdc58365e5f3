"""A typed Python client for the vaultgraph REST API (needs the `client` extra: httpx).

Covers every token route of the service (docs/python-client.md), with the same methods on
`Client` and `AsyncClient`: create_token, get_token, list_tokens, iter_tokens, update_token,
delete_token, create_child, children, parents, link, unlink, graph, search, tokenize,
detokenize and logs (the audit trail); the outbound proxies (docs/proxy.md):
create_proxy, get_proxy, list_proxies, update_proxy, delete_proxy and proxy (a call through
one: its answer is the destination's `ProxyResponse`); and webhook management
(docs/webhooks.md): create_webhook, list_webhooks, get_webhook, update_webhook,
delete_webhook, rotate_webhook_secret, test_webhook, webhook_deliveries and
retry_webhook_delivery.
"""

try:
    import httpx  # noqa: F401
except ModuleNotFoundError as exc:  # the base package does not install it
    if exc.name != "httpx":
        raise
    raise ModuleNotFoundError("vaultgraph.client needs httpx, from vaultgraph's client extra: "
                              "pip install 'vaultgraph[client]' (in a checkout: pip install -e "
                              "'.[client]')", name="httpx") from None

from ._core import NO_RETRIES, RetryPolicy
from .client import AsyncClient, Client
from .errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
    UnprocessableContent,
    UnsupportedMediaType,
    VaultgraphError,
)
from .types import (
    AuditEvent,
    AuditPage,
    Graph,
    Link,
    Proxy,
    ProxyPage,
    ProxyResponse,
    Token,
    TokenPage,
)

__all__ = [
    "NO_RETRIES", "ApiError", "AsyncClient", "AuditEvent", "AuditPage", "BadRequest", "Client",
    "Conflict", "Forbidden",
    "Graph", "Link", "NotFound", "PayloadTooLarge", "Proxy", "ProxyPage", "ProxyResponse",
    "RateLimited", "RetryPolicy", "ServerError",
    "Token", "TokenPage", "TransportError", "Unauthorized", "UnprocessableContent",
    "UnsupportedMediaType", "VaultgraphError",
]
