"""The application factory: it only wires. Resources open in cleanup contexts."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from .access_generation import AccessGeneration
from .api import metrics, middleware
from .api.idempotency import idempotency
from .api.ratelimit import add_headers
from .api.routes import add_routes
from .api.typedefs import services_key, settings_key
from .settings import Settings
from .wiring import open_services

# The request middlewares, outermost first: the one list of them. docs/architecture.md ("The
# middleware chain") describes each, in this order; tests/unit/test_architecture.py holds the
# two together. Rate limits come after authentication (they count per application) and before
# any decision about the request (a refusal costs like an answer); idempotency comes last (its
# entries are per application; a request over the limit or refused claims no key).
MIDDLEWARES = (
    middleware.observe,
    middleware.audit,
    middleware.errors,
    middleware.access,
    idempotency,
)

background_start_key: web.AppKey[bool] = web.AppKey("background_start")
schema_applied_key: web.AppKey[bool] = web.AppKey("schema_applied")
access_generation_key: web.AppKey[AccessGeneration | None] = web.AppKey("access_generation")


def create_app(settings: Settings, *, background_start: bool = False,
               schema_applied: bool = False,
               access_generation: AccessGeneration | None = None) -> web.Application:
    """`background_start`: open without waiting on Neo4j (the server runs
    `services.startup` in the background and listens at once; see `vaultgraph/server.py`).
    `schema_applied`: the caller has applied the schema to this database already (the test
    suite does it once per run, `tests/conftest.py`), so start-up does not apply it again.
    `access_generation`: shared by the workers of `serve --workers N` (`vaultgraph/server.py`)."""
    app = web.Application(middlewares=MIDDLEWARES, client_max_size=settings.max_body_bytes)
    app[settings_key] = settings
    app[background_start_key] = background_start
    app[schema_applied_key] = schema_applied
    app[access_generation_key] = access_generation
    add_routes(app)
    metrics.install(app)
    app.on_response_prepare.append(add_headers)
    app.cleanup_ctx.append(_services)
    # Cleaned up in reverse: the sweeper stops (its last events handed over) before the audit
    # writer that links them stops.
    app.cleanup_ctx.append(_audit)
    app.cleanup_ctx.append(_expiry_sweeper)
    app.cleanup_ctx.append(_webhook_sender)
    return app


async def _services(app: web.Application) -> AsyncIterator[None]:
    async with open_services(app[settings_key], background_start=app[background_start_key],
                             schema_applied=app[schema_applied_key],
                             access_generation=app[access_generation_key]) as services:
        app[services_key] = services
        yield


async def _expiry_sweeper(app: web.Application) -> AsyncIterator[None]:
    """Expired tokens are deleted in the background; the task ends before the driver closes."""
    sweeper = app[services_key].expiry
    sweeper.start()
    yield
    await sweeper.stop()


async def _webhook_sender(app: web.Application) -> AsyncIterator[None]:
    """The outbox's events are delivered in the background (services/webhook_sender.py); the
    sender stops, its attempts under way given a grace, before the driver closes."""
    sender = app[services_key].webhook_sender
    if sender is not None:
        sender.start()
    yield
    if sender is not None:
        await sender.stop()


async def _audit(app: web.Application) -> AsyncIterator[None]:
    """The trail's pruner runs in the background; pending events are written before the driver
    closes (the writer itself stops in wiring.open_services)."""
    services = app[services_key]
    services.audit_pruner.start()
    if services.audit_writer is not None and services.readiness.started:
        # Started with the database at hand (not in the background: Startup.run does it
        # there): creates' events are placed from the first one on.
        await services.audit_writer.open_writes()
    yield
    await services.audit_pruner.stop()
    if services.audit_writer is not None:
        await services.audit_writer.stop()
