"""Permissions, and how a route declares the one it needs.

An endpoint declares its access once, in its `api/endpoints.py` declaration, which marks the
handler here. Every route is protected by default: the authentication middleware refuses (403) a
handler that declares nothing, and a test fails on any such route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

TOKEN_CREATE = "token:create"
TOKEN_READ = "token:read"
TOKEN_UPDATE = "token:update"
TOKEN_DELETE = "token:delete"
TOKEN_SEARCH = "token:search"
# A token's revealed data may leave through an outbound proxy (and nothing else: it reads
# nothing back to the caller).
TOKEN_USE = "token:use"
APPLICATION_CREATE = "application:create"
APPLICATION_READ = "application:read"
APPLICATION_UPDATE = "application:update"
APPLICATION_DELETE = "application:delete"
LOG_READ = "log:read"
PROXY_CREATE = "proxy:create"
PROXY_READ = "proxy:read"
PROXY_UPDATE = "proxy:update"
PROXY_DELETE = "proxy:delete"
WEBHOOK_CREATE = "webhook:create"
WEBHOOK_READ = "webhook:read"
WEBHOOK_UPDATE = "webhook:update"
WEBHOOK_DELETE = "webhook:delete"

TOKEN_PERMISSIONS = (TOKEN_CREATE, TOKEN_READ, TOKEN_UPDATE, TOKEN_DELETE, TOKEN_SEARCH,
                     TOKEN_USE)
MANAGEMENT_PERMISSIONS = (
    APPLICATION_CREATE, APPLICATION_READ, APPLICATION_UPDATE, APPLICATION_DELETE)
AUDIT_PERMISSIONS = (LOG_READ,)
PROXY_PERMISSIONS = (PROXY_CREATE, PROXY_READ, PROXY_UPDATE, PROXY_DELETE)
WEBHOOK_PERMISSIONS = (WEBHOOK_CREATE, WEBHOOK_READ, WEBHOOK_UPDATE, WEBHOOK_DELETE)
ALL_PERMISSIONS = (TOKEN_PERMISSIONS + MANAGEMENT_PERMISSIONS + AUDIT_PERMISSIONS
                   + PROXY_PERMISSIONS + WEBHOOK_PERMISSIONS)

PUBLIC = "public"
AUTHENTICATED = "authenticated"
ATTR = "__vaultgraph_permission__"
H = TypeVar("H", bound=Callable)


def check_access(access: tuple[str, ...] | str) -> None:
    """What an endpoint may declare (api/endpoints.py): PUBLIC (no API key), AUTHENTICATED (a
    working key, no particular permission) or the permissions it needs, all of them."""
    if access in (PUBLIC, AUTHENTICATED):
        return
    if not isinstance(access, tuple) or not access or set(access) - set(ALL_PERMISSIONS):
        raise ValueError(f"unknown access {access!r}")


def declare(handler: H, access: tuple[str, ...] | str) -> H:
    """Mark a handler with what it needs; the authentication middleware enforces it."""
    check_access(access)
    setattr(handler, ATTR, access)
    return handler


def declared(handler: Callable) -> tuple[str, ...] | str | None:
    return getattr(handler, ATTR, None)
