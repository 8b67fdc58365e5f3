"""Permissions, and how a route declares the one it needs.

Every route is protected by default: the authentication middleware refuses (403) a handler that
declares nothing, and a test fails on any such route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

TOKEN_CREATE = "token:create"
TOKEN_READ = "token:read"
TOKEN_UPDATE = "token:update"
TOKEN_DELETE = "token:delete"
TOKEN_SEARCH = "token:search"
APPLICATION_CREATE = "application:create"
APPLICATION_READ = "application:read"
APPLICATION_UPDATE = "application:update"
APPLICATION_DELETE = "application:delete"

TOKEN_PERMISSIONS = (TOKEN_CREATE, TOKEN_READ, TOKEN_UPDATE, TOKEN_DELETE, TOKEN_SEARCH)
MANAGEMENT_PERMISSIONS = (
    APPLICATION_CREATE, APPLICATION_READ, APPLICATION_UPDATE, APPLICATION_DELETE)
ALL_PERMISSIONS = TOKEN_PERMISSIONS + MANAGEMENT_PERMISSIONS

PUBLIC = "public"
AUTHENTICATED = "authenticated"
ATTR = "__vaultgraph_permission__"
H = TypeVar("H", bound=Callable)


def requires(*permissions: str) -> Callable[[H], H]:
    """Declare the permissions a handler needs (all of them); the middleware enforces it."""
    unknown = set(permissions) - set(ALL_PERMISSIONS)
    if unknown or not permissions:
        raise ValueError(f"unknown permissions {sorted(unknown)}")

    def mark(handler: H) -> H:
        setattr(handler, ATTR, tuple(permissions))
        return handler

    return mark


def public(handler: H) -> H:
    """Declare that a handler needs no API key (health, docs)."""
    setattr(handler, ATTR, PUBLIC)
    return handler


def authenticated(handler: H) -> H:
    """Declare that a handler needs a valid API key and no particular permission."""
    setattr(handler, ATTR, AUTHENTICATED)
    return handler


def declared(handler: Callable) -> tuple[str, ...] | str | None:
    return getattr(handler, ATTR, None)
