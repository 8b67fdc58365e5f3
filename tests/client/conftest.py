"""The client against the real service: `vaultgraph serve` in a subprocess on a free port
(httpx needs a listening server), on the Neo4j `make test` started, with the run's KEK."""

from __future__ import annotations

import pytest
from factories import service_env

from vaultgraph.testing.service import ServiceProcess


@pytest.fixture(scope="session")
def service(settings):
    with ServiceProcess(service_env(settings)) as running:
        yield running


@pytest.fixture(scope="session")
def service_tenant(service):
    return service.create_tenant("client-tests")
