"""Two replicas of the service, as a load balancer would spread clients over them: two
`vaultgraph serve` subprocesses (vaultgraph.testing.service) on their own ports, one real
Neo4j between them, and nothing else shared (docs/operations.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import neo4j
import pytest
from factories import service_env

from vaultgraph.testing.service import ServiceProcess


@contextlib.contextmanager
def two_replicas(settings, each: tuple[dict, dict] = ({}, {}),
                 **env: str) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    """Replicas "a" and "b" with the run's settings plus `env` (VAULTGRAPH_* values) and each
    one's own `each[i]`, each with its own API port; stopped (SIGTERM, drained) at the end."""
    base = {**service_env(settings), "VAULTGRAPH_AUDIT_PRUNE_INTERVAL": "0", **env}
    with ServiceProcess({**base, "VAULTGRAPH_REPLICA": "replica-a", **each[0]}) as a, \
            ServiceProcess({**base, "VAULTGRAPH_REPLICA": "replica-b", **each[1]}) as b:
        yield a, b


@pytest.fixture
async def graph(settings):
    """`await graph(statement, **params)`: the test's own statement on the real Neo4j, to set
    up data the API refuses (a past expiry) and to read stored state back."""
    driver = neo4j.AsyncGraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.resolved_neo4j_password()))

    async def run(statement: str, **params) -> list[dict]:
        records, _, _ = await driver.execute_query(statement, params,
                                                   database_=settings.neo4j_database)
        return [dict(r) for r in records]

    yield run
    await driver.close()
