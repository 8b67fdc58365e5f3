"""Fixtures over the real Neo4j that `make test` starts (never a mock of it).

Every test gets its own tenant, so tests never see each other's data. What does not depend on
the test is done once per run: the first test that asks for `settings` empties the test
database, applies the schema and has Neo4j plan the service's statements and run its write path
once (`warm_neo4j`); the `app` fixture's apps then skip the schema step at start-up
(a test that builds its own app with `create_app(settings)` still applies it, idempotently).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import secrets
import warnings

import neo4j
import pytest

from vaultgraph.app import create_app
from vaultgraph.catalog import Catalog
from vaultgraph.crypto import KeyRing
from vaultgraph.repository.warmup import prepare, rehearse
from vaultgraph.settings import Settings
from vaultgraph.wiring import connect

# Removes everything (a run's thousands of tokens and audit events) in bounded transactions.
WIPE = "MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS"


def prepare_database(settings: Settings) -> None:
    """Empty the test database and apply the schema: once per run, before any test uses it."""
    with neo4j.GraphDatabase.driver(settings.neo4j_uri, auth=(
            settings.neo4j_user, settings.resolved_neo4j_password())) as driver:
        with driver.session(database=settings.neo4j_database) as session:
            session.run(WIPE).consume()
        for statement in Catalog.load(settings.cypher_dir).schema_statements():
            driver.execute_query(statement, database_=settings.neo4j_database)


def warm_neo4j(settings: Settings) -> None:
    """What the service's start-up does before it says ready (services/startup.py): every
    statement planned in the forms requests send it, and the write path run once and removed.
    On a Neo4j just started (`make test` starts one) the first plans take seconds each on a
    cold JVM, more on a busy machine: without this the run's first tests paid for them within
    their requests' deadlines, and a busy machine's first test answered 503."""
    async def warm() -> None:
        db = connect(settings)
        try:
            await rehearse(db, await prepare(db))
        finally:
            await db.close()

    asyncio.run(warm())


@pytest.fixture(scope="session")
def settings() -> Settings:
    base = Settings.from_env()
    try:
        base.resolved_neo4j_password()
    except ValueError:
        pytest.fail("no Neo4j for the tests: run them with `make test`, which starts one")
    # One fresh key-encryption key for the whole run: tests never depend on a file on disk.
    # Its version is the run's own, so the start-up key check (server.py) of a service this run
    # starts looks only at tenants this run created, not at earlier runs' under other keys.
    key = KeyRing.generate_spec().partition(":")[2]
    if not os.environ.get("VAULTGRAPH_TESTS_KEEP_DATA"):  # set when another run shares Neo4j
        prepare_database(base)
    if os.environ.get("VAULTGRAPH_TESTS_WARM", "1") != "0":  # 0: a few tests, a quiet machine
        warm_neo4j(base)
    # No webhook sender unless a test asks for one (tests/integration/webhooks): a sender
    # claims any tenant's due deliveries, so one left running would take other tests' events.
    # The database is shared on purpose (each test's key ring of its own, another run's with
    # VAULTGRAPH_TESTS_KEEP_DATA): the key check passes over tenants under KEKs a ring lacks.
    # Commands and services in subprocesses inherit it; the tests of that refusal turn it off.
    os.environ["VAULTGRAPH_SHARED_DATABASE"] = "true"
    return dataclasses.replace(base, kek=f"run{secrets.token_hex(6)}:{key}", log_level="WARNING",
                               webhook_poll_interval=0.0, shared_database=True)


def run_cypher(settings: Settings, statement: str) -> None:
    with neo4j.GraphDatabase.driver(settings.neo4j_uri, auth=(
            settings.neo4j_user, settings.resolved_neo4j_password())) as driver:
        driver.execute_query(statement, database_=settings.neo4j_database)


@pytest.fixture
def own_tenants_only(settings):
    """While the test runs the database shows no other test's tenants (set aside under another
    label), and the tenants it made are deleted after it: for a test whose key ring reuses a
    version name other tests use (`k1`), or that checks the refusal of a ring lacking a KEK a
    stored tenant is wrapped under (which every other test's tenant would trigger)."""
    run_cypher(settings, "MATCH (t:Tenant) SET t:TenantAside REMOVE t:Tenant")
    try:
        yield
    finally:
        run_cypher(settings, "MATCH (t:Tenant) DETACH DELETE t")
        run_cypher(settings, "MATCH (t:TenantAside) SET t:Tenant REMOVE t:TenantAside")


@pytest.fixture
def app(settings):
    """A new app per test (its own driver, caches and limits) on the run's prepared schema."""
    return create_app(settings, schema_applied=True)


@pytest.fixture
async def client(aiohttp_client, app):
    return await aiohttp_client(app)


@pytest.fixture
async def tenant(client):
    """A new tenant with its administrator key (every permission, reveal on `/`)."""
    from factories import new_tenant

    app = client.server.app
    return await new_tenant(app, "test")


@pytest.fixture
def admin_headers(tenant) -> dict[str, str]:
    return {"SVC-API-KEY": tenant.key}


@pytest.fixture
async def dead_sockets_collected():
    """For a test whose driver loses its server (stopped, or never there): requested first so
    it is torn down last. The driver drops such connections, and a connect it cancels, without
    closing their sockets; their ResourceWarning would otherwise surface, at garbage
    collection, in whichever test runs next. Callbacks still queued on the loop can hold the
    last reference for a few turns (seen on a loaded machine), so it collects after letting
    them run, more than once."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for _ in range(3):
            await asyncio.sleep(0.05)
            gc.collect()
