"""The client against the real service: `vaultgraph serve` in a subprocess on a free port
(httpx needs a listening server), on the Neo4j `make test` started, with the run's KEK."""

from __future__ import annotations

import pytest

from vaultgraph.testing.service import ServiceProcess


@pytest.fixture(scope="session")
def service(settings):
    env = {
        "PATH": "/usr/bin:/bin",
        "VAULTGRAPH_NEO4J_URI": settings.neo4j_uri,
        "VAULTGRAPH_NEO4J_USER": settings.neo4j_user,
        "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password(),
        "VAULTGRAPH_NEO4J_DATABASE": settings.neo4j_database,
        "VAULTGRAPH_KEK": settings.kek,
        "VAULTGRAPH_CYPHER_DIR": settings.cypher_dir,
        "VAULTGRAPH_LOG_LEVEL": "WARNING",
        "VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "0",
    }
    with ServiceProcess(env) as running:
        yield running


@pytest.fixture(scope="session")
def service_tenant(service):
    return service.create_tenant("client-tests")
