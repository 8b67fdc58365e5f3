"""Every route of the service, in one place."""

from __future__ import annotations

from aiohttp import web

from .api import applications, docs, graph, health, tokens

ROUTE_TABLES = (health.routes, tokens.routes, graph.routes, applications.routes, docs.routes)


def add_routes(app: web.Application) -> None:
    for table in ROUTE_TABLES:
        app.router.add_routes(table)
    # /openapi.json describes the routes registered by start-up, and only those.
    app.on_startup.append(docs.publish_openapi)
