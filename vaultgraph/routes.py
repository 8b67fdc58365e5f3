"""Every route of the service, in one place."""

from __future__ import annotations

from aiohttp import web

from .api import health, tokens

ROUTE_TABLES = (health.routes, tokens.routes)


def add_routes(app: web.Application) -> None:
    for table in ROUTE_TABLES:
        app.router.add_routes(table)
