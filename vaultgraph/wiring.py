"""Start-up wiring, written once: the HTTP app and the command line both open the service here.

Resources open in order (catalog, key ring, driver, schema) and close in reverse; repositories
and services are built on them and handed out as one `Services` object.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from .access_generation import AccessGeneration
from .catalog import Catalog
from .crypto import KeyRing, TenantKeyCache
from .keys.custody import Custody, open_custody
from .outbound import AddressPolicy, OutboundClient
from .repository.applications import ApplicationRepository
from .repository.audit import AuditRepository
from .repository.auth import AuthRepository
from .repository.database import Database
from .repository.expiry import ExpiryRepository
from .repository.graph import GraphRepository
from .repository.idempotency import IdempotencyRepository
from .repository.proxies import ProxyRepository
from .repository.search import SearchRepository
from .repository.tenants import TenantRepository
from .repository.tokens import TokenRepository
from .repository.webhooks import WebhookRepository
from .services.applications import ApplicationService
from .services.audit_log import AuditLog
from .services.audit_pruner import AuditPruner
from .services.audit_writer import AuditWriter
from .services.authentication import Authenticator
from .services.bulk import BulkService
from .services.expiry import ExpirySweeper
from .services.graph import GraphService
from .services.health import Readiness
from .services.idempotency import IdempotencyService
from .services.proxy import ProxyService
from .services.ratelimits import RateLimits
from .services.rendering import Renderer
from .services.search import SearchService
from .services.startup import Startup
from .services.tenants import TenantService
from .services.tokens import TokenService
from .services.webhook_sender import WebhookSender
from .services.webhooks import WebhookService
from .settings import Settings

log = logging.getLogger("vaultgraph")


@dataclass
class Services:
    settings: Settings
    database: Database
    keyring: KeyRing | None
    authenticator: Authenticator | None
    tokens: TokenService
    graph: GraphService
    search: SearchService
    applications: ApplicationService
    tenants: TenantService | None
    readiness: Readiness
    startup: Startup
    expiry: ExpirySweeper
    audit_log: AuditLog
    audit_writer: AuditWriter | None
    audit_pruner: AuditPruner
    bulk: BulkService
    idempotency: IdempotencyService
    rate_limits: RateLimits
    outbound: OutboundClient  # every request the vault sends out (webhooks, the proxy)
    proxies: ProxyService
    webhooks: WebhookService
    webhook_sender: WebhookSender | None  # None without a key ring (the CLI's management)
    custody: Custody | None = None


def connect(settings: Settings) -> Database:
    return Database.connect(
        settings.neo4j_uri, settings.neo4j_user, settings.resolved_neo4j_password(),
        Catalog.load(settings.cypher_dir), settings.neo4j_database, settings.neo4j_pool_size,
        timeout=settings.request_timeout, acquire_timeout=settings.neo4j_acquire_timeout,
        connect_timeout=settings.neo4j_connect_timeout,
        read_routing=settings.neo4j_read_routing)


@asynccontextmanager
async def open_services(settings: Settings, *, with_keys: bool = True,
                        schema_required: bool = False,
                        background_start: bool = False,
                        schema_applied: bool = False,
                        access_generation: AccessGeneration | None = None
                        ) -> AsyncIterator[Services]:
    """The service's parts over one driver. `with_keys`: load the key-encryption key ring
    (token and tenant use cases need it, and so does the audit writer, which signs under a key
    derived from it and is None without it; reading applications does not).
    `schema_required`: fail when the schema cannot be applied now (the CLI) instead of leaving
    it for readiness to retry (the server starts and answers 503 until Neo4j is back); at
    once when nothing listens at Neo4j's address (`Database.check_listening`).
    `background_start`: touch no database here; `Services.startup.run()` (the server runs it
    in the background) applies the schema, checks the key ring and warms the pool.
    `schema_applied`: the caller applied the schema already (the test suite, once per run).
    `access_generation`: the one the workers of `serve --workers N` share (None otherwise)."""
    # The key-encryption keys from their provider (a token is reached and logged in here).
    custody = await asyncio.to_thread(open_custody, settings) if with_keys else None
    keyring = custody.ring if custody else None
    try:
        db = connect(settings)
    except BaseException:
        if custody:
            custody.close()
        raise
    renderer = Renderer(workers=settings.render_workers, budget=settings.render_budget)
    outbound = OutboundClient(AddressPolicy.from_settings(settings))  # opens on first use
    try:
        try:
            if schema_applied:
                db.schema_applied = True
            elif not background_start:
                if schema_required:  # a command: nothing listening fails now, not after retries
                    await db.check_listening()
                await db.apply_schema()
        except Exception as exc:
            if schema_required:
                raise
            log.warning("schema not applied at start-up: database unavailable",
                        extra={"error": type(exc).__name__})
        # The key file is re-read when a tenant's keys name a KEK version the ring lacks
        # (`vaultgraph keys rotate` online); a ring from VAULTGRAPH_KEK changes on restart only.
        reload = custody.reload if custody and not settings.kek else None
        tenant_keys = TenantKeyCache(keyring, reload=reload) if keyring else None
        authenticator = (Authenticator(AuthRepository(db), tenant_keys, settings.auth_cache_ttl,
                                       access_generation)
                         if tenant_keys is not None else None)
        webhook_repo = WebhookRepository(db)
        token_repo = TokenRepository(db, create_lanes=settings.create_lanes,
                                     create_batch_max=settings.create_batch_max,
                                     get_lanes=settings.get_lanes,
                                     get_batch_max=settings.get_batch_max)
        tokens = TokenService(token_repo, settings, renderer)
        audit_repo = AuditRepository(db)
        audit_log = AuditLog(audit_repo, keyring)
        writer = (AuditWriter.from_settings(audit_repo, keyring, settings)
                  if keyring else None)
        readiness = Readiness(db)
        readiness.started = not background_start
        tenants = (TenantService(TenantRepository(db), keyring, reload=reload,
                                 shared=settings.shared_database)
                   if keyring else None)
        search_repo = SearchRepository(db)
        yield Services(
            settings=settings,
            database=db,
            keyring=keyring,
            authenticator=authenticator,
            tokens=tokens,
            graph=GraphService(GraphRepository(db), tokens),
            search=SearchService(search_repo, tokens, settings),
            applications=ApplicationService(
                ApplicationRepository(db),
                on_access_changed=authenticator.invalidate if authenticator else lambda: None),
            tenants=tenants,
            readiness=readiness,
            startup=Startup(db, readiness, tenants, settings.neo4j_pool_warm,
                            prepare=search_repo.prepare, writer=writer),
            expiry=ExpirySweeper(ExpiryRepository(db), interval=settings.expiry_sweep_interval,
                                 batch=settings.expiry_sweep_batch, audit=writer),
            audit_log=audit_log,
            audit_writer=writer,
            audit_pruner=AuditPruner(audit_repo, keyring,
                                     retention_days=settings.audit_retention_days,
                                     interval=settings.audit_prune_interval),
            bulk=BulkService(tokens, token_repo, renderer, max_items=settings.bulk_max_items),
            idempotency=IdempotencyService(IdempotencyRepository(db),
                                           ttl=settings.idempotency_ttl,
                                           lease=settings.idempotency_lease,
                                           request_timeout=settings.request_timeout),
            rate_limits=RateLimits(rate=settings.rate_limit, burst=settings.rate_burst,
                                   auth_failures=settings.auth_failure_limit,
                                   auth_failure_window=settings.auth_failure_window),
            custody=custody,
            outbound=outbound,
            proxies=ProxyService(ProxyRepository(db), token_repo, renderer, outbound,
                                 max_in_flight=settings.proxy_max_in_flight),
            webhooks=WebhookService(webhook_repo, check_url=outbound.policy.check_url),
            webhook_sender=WebhookSender(
                webhook_repo, outbound, tenant_keys,
                schedule=settings.webhook_retry_schedule_seconds, lease=settings.webhook_lease,
                timeout=settings.webhook_timeout, disable_after=settings.webhook_disable_after,
                interval=settings.webhook_poll_interval, batch=settings.webhook_max_in_flight,
                per_endpoint=settings.webhook_endpoint_concurrency,
                retention=settings.webhook_retention_days * 86_400,
                ready=lambda: readiness.started)
            if tenant_keys is not None else None,
        )
        if writer is not None:
            await writer.stop()
    finally:
        renderer.close()
        await outbound.close()
        await db.close()
        if custody:
            await asyncio.to_thread(custody.close)
