"""Every route of the service, in one place."""

from __future__ import annotations

from aiohttp import web

from . import (
    applications,
    audit_log,
    bulk,
    docs,
    graph,
    health,
    proxies,
    search,
    tokens,
    webhooks,
)

ENDPOINTS = (health.endpoints, search.endpoints, tokens.endpoints, bulk.endpoints,
             graph.endpoints, applications.endpoints, audit_log.endpoints, proxies.endpoints,
             webhooks.endpoints,
             docs.endpoints)


def add_routes(app: web.Application) -> None:
    for table in ENDPOINTS:
        app.router.add_routes(table.routes())
    # /openapi.json describes the routes registered by start-up, and only those.
    app.on_startup.append(docs.publish_openapi)
