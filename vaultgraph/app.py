"""The application factory: it only wires. Resources open in cleanup contexts."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web

from . import middleware
from .auth.authenticate import Authenticator
from .catalog import Catalog
from .crypto import KeyRing, TenantKeyCache
from .db import Database
from .repository.graph import GraphRepository
from .repository.tokens import TokenRepository
from .routes import add_routes
from .services.expiry import ExpirySweeper
from .services.graph import GraphService
from .services.tokens import TokenService
from .settings import Settings
from .typedefs import (
    authenticator_key,
    catalog_key,
    database_key,
    expiry_sweeper_key,
    graph_service_key,
    keyring_key,
    settings_key,
    token_service_key,
)

log = logging.getLogger("vaultgraph")


def create_app(settings: Settings) -> web.Application:
    app = web.Application(
        middlewares=[middleware.trace, middleware.errors, middleware.authenticate],
        client_max_size=settings.max_body_bytes,
    )
    app[settings_key] = settings
    add_routes(app)
    app.cleanup_ctx.append(_database)
    app.cleanup_ctx.append(_expiry_sweeper)
    return app


async def _database(app: web.Application) -> AsyncIterator[None]:
    settings = app[settings_key]
    catalog = Catalog.load(settings.cypher_dir)
    keyring = KeyRing.from_spec(settings.resolved_kek())
    db = Database.connect(
        settings.neo4j_uri, settings.neo4j_user, settings.resolved_neo4j_password(), catalog,
        settings.neo4j_database, settings.neo4j_pool_size)
    try:
        await db.apply_schema()
    except Exception as exc:
        # The service still starts: /ready answers 503 until the database is back, and
        # the schema is applied again on the next start.
        log.warning("schema not applied at start-up: database unavailable",
                    extra={"error": type(exc).__name__})
    tenant_keys = TenantKeyCache(keyring)
    app[catalog_key] = catalog
    app[keyring_key] = keyring
    app[database_key] = db
    app[authenticator_key] = Authenticator(db, tenant_keys, settings.auth_cache_ttl)
    app[token_service_key] = TokenService(TokenRepository(db), settings)
    app[graph_service_key] = GraphService(GraphRepository(db), app[token_service_key])
    yield
    await db.close()


async def _expiry_sweeper(app: web.Application) -> AsyncIterator[None]:
    """Expired tokens are deleted in the background; the task ends before the driver closes."""
    settings = app[settings_key]
    sweeper = ExpirySweeper(app[database_key], interval=settings.expiry_sweep_interval,
                            batch=settings.expiry_sweep_batch)
    app[expiry_sweeper_key] = sweeper
    sweeper.start()
    yield
    await sweeper.stop()
