"""A request's deadline for all its database work (`VAULTGRAPH_REQUEST_TIMEOUT` in all, retries
included), set once when a protected request starts (api/middleware.py `audit`): the HTTP layer
reaches storage only through services."""

from ..repository.database import request_deadline

__all__ = ["request_deadline"]
