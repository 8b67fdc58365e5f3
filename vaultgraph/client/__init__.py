"""A typed Python client for the vaultgraph REST API (needs the `client` extra: httpx).

Covers tokens, child tokens, associations, parents and traversal. Search, tokenize/detokenize
and the audit logs are not in the service yet, so not here either.
"""

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
    UnsupportedMediaType,
    VaultgraphError,
)
from .types import AuditEvent, AuditPage, Graph, Link, Token, TokenPage

__all__ = [
    "NO_RETRIES", "ApiError", "AsyncClient", "AuditEvent", "AuditPage", "BadRequest", "Client",
    "Conflict", "Forbidden",
    "Graph", "Link", "NotFound", "PayloadTooLarge", "RateLimited", "RetryPolicy", "ServerError",
    "Token", "TokenPage", "TransportError", "Unauthorized", "UnsupportedMediaType",
    "VaultgraphError",
]
