"""The pytest plugin other projects get with the package (entry point `pytest11`): a
session-scoped `vaultgraph` fixture — a running vault on a real Neo4j, a fresh tenant, its
administrator key and a client (docs/containers-and-downstream-tests.md).

Inert unless a test asks for the fixture: importing this module imports pytest only, and
nothing starts, connects or reads the environment until the fixture is first requested.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .vault import Vault

MODES = ("local", "uri", "container")
_HELP = ("where the `vaultgraph` fixture's Neo4j comes from: local (one of its own, started "
         "through the package's launcher in a temporary home on free ports; default), uri "
         "(VAULTGRAPH_NEO4J_URI / _PASSWORD), container (testcontainers; needs a Docker "
         "engine)")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vaultgraph")
    group.addoption("--vaultgraph-neo4j", choices=MODES, default=None, help=_HELP)
    parser.addini("vaultgraph_neo4j", _HELP, default="local")


NO_CLIENT = ("the vaultgraph fixture needs vaultgraph's client extra (httpx), which is not "
             "installed: pip install 'vaultgraph[client]' (in a checkout: pip install -e "
             "'.[client]')")


def _require_client() -> None:
    """The fixture hands out a `vaultgraph.client.Client`, which needs httpx: say which extra
    to install, before anything starts, rather than fail on a bare ModuleNotFoundError."""
    try:
        import httpx  # noqa: F401
    except ModuleNotFoundError:
        pytest.fail(NO_CLIENT, pytrace=False)


@pytest.fixture(scope="session")
def vaultgraph(request: pytest.FixtureRequest) -> Iterator[Vault]:
    """A vault for the whole session: `.url`, `.tenant_id`, `.application_id`, `.admin_key`,
    `.client` (a `vaultgraph.client.Client`), `.async_client()` and `.new_tenant()`."""
    _require_client()
    from .vault import running_vault

    mode = request.config.getoption("--vaultgraph-neo4j") or request.config.getini(
        "vaultgraph_neo4j")
    if mode not in MODES:
        raise pytest.UsageError(f"vaultgraph_neo4j must be one of {', '.join(MODES)}")
    with running_vault(mode) as vault:
        yield vault
