"""What the `vaultgraph` fixture starts: Neo4j (a local one of its own through the launcher, a
given URI, or a container), `vaultgraph serve` on it, a fresh tenant and a client
(docs/containers-and-downstream-tests.md).

The service runs as a subprocess, exactly as in production (`service.ServiceProcess`), with a
key-encryption key made for the run. It reads the Cypher catalog shipped inside the package
(`vaultgraph.cypher`), so an installed wheel is enough.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .service import ServiceError, ServiceProcess, Tenant, free_port

if TYPE_CHECKING:
    from ..client import AsyncClient, Client

NEO4J_IMAGE = "neo4j:5.26-community"
# Passed on to the service from the test run's environment when set.
_PASSED_ON = ("PATH", "HOME", "VAULTGRAPH_HOME", "VAULTGRAPH_CYPHER_DIR",
              "VAULTGRAPH_NEO4J_DATABASE", "VAULTGRAPH_NEO4J_USER")


@dataclass(frozen=True)
class Neo4jTarget:
    uri: str
    password: str = field(repr=False)  # never in a test report's repr
    user: str = "neo4j"


@dataclass(frozen=True)
class Vault:
    url: str
    tenant_id: str
    application_id: str
    admin_key: str = field(repr=False)
    client: Client = field(repr=False)
    service: ServiceProcess = field(repr=False)

    def async_client(self, api_key: str | None = None) -> AsyncClient:
        """A new `AsyncClient` (the caller closes it: `async with vaultgraph.async_client()`)."""
        from ..client import AsyncClient

        return AsyncClient(self.url, api_key or self.admin_key)

    def new_tenant(self, name: str = "test") -> Tenant:
        """Another tenant on the same vault, with its own administrator key."""
        return self.service.create_tenant(name)


def new_kek() -> str:
    """A throwaway key-encryption key ring for one session, under a version name of its own
    (`pytest<hex>:` + 32 random bytes, base64url): the service checks at start that its ring
    opens the tenant keys stored under the ring's versions, and a database other runs or
    services wrote to holds keys under theirs (`k1`, say) that this one must never claim."""
    version = "pytest" + os.urandom(4).hex()
    return f"{version}:" + base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()


def _free_ports(n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


@contextlib.contextmanager
def local_neo4j() -> Iterator[Neo4jTarget]:
    """A Neo4j of the session's own, through the package's launcher: a new home in a temporary
    folder (its conf, data, logs and password) on free loopback ports, stopped and removed at
    the end of the session.

    Never a server that is already running, whatever VAULTGRAPH_NEO4J_BOLT_PORT says: the
    session writes tenants whose keys are wrapped under a throwaway key-encryption key, and
    audit chains MAC'd under it; in a developer's database (`make run`'s) they would stay, and
    `vaultgraph keys rotate` and `audit verify` there would fail on them for good. From the
    environment only the jar cache (`$VAULTGRAPH_HOME/neo4j-lib`, fetched on first use) and
    the memory sizes are taken. A Neo4j you choose is `--vaultgraph-neo4j=uri`."""
    from ..neo4j_local import LocalNeo4j
    from ..settings import Settings

    settings = Settings.from_env()
    root = Path(tempfile.mkdtemp(prefix="vaultgraph-pytest-"))
    bolt, http = _free_ports(2)
    neo = LocalNeo4j(home=root / "neo4j", lib_dir=settings.home_path / "neo4j-lib",
                     bolt_port=bolt, http_port=http, heap=settings.neo4j_heap,
                     pagecache=settings.neo4j_pagecache)
    try:
        neo.start()
        yield Neo4jTarget(neo.uri, neo.resolve_password())
    finally:
        neo.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def given_neo4j() -> Iterator[Neo4jTarget]:
    uri, password = os.environ.get("VAULTGRAPH_NEO4J_URI"), os.environ.get(
        "VAULTGRAPH_NEO4J_PASSWORD")
    if not uri or not password:
        raise ServiceError("--vaultgraph-neo4j=uri needs VAULTGRAPH_NEO4J_URI and "
                           "VAULTGRAPH_NEO4J_PASSWORD")
    yield Neo4jTarget(uri, password, os.environ.get("VAULTGRAPH_NEO4J_USER", "neo4j"))


def docker_engine() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    result = subprocess.run([docker, "info"], capture_output=True, timeout=30,  # noqa: S603
                            check=False)
    return result.returncode == 0


@contextlib.contextmanager
def container_neo4j() -> Iterator[Neo4jTarget]:
    """Neo4j Community 5.26 in a container (the `containers` extra: testcontainers)."""
    if not docker_engine():
        raise ServiceError("--vaultgraph-neo4j=container needs a running Docker engine; "
                           "use the default (local) instead")
    try:
        from testcontainers.neo4j import Neo4jContainer
    except ImportError:
        raise ServiceError("--vaultgraph-neo4j=container needs testcontainers: "
                           "pip install 'vaultgraph[containers]'") from None
    password = base64.urlsafe_b64encode(os.urandom(18)).decode()
    with Neo4jContainer(NEO4J_IMAGE, password=password) as neo:
        yield Neo4jTarget(neo.get_connection_url(), password)


SOURCES = {"local": local_neo4j, "uri": given_neo4j, "container": container_neo4j}


def service_env(target: Neo4jTarget) -> dict[str, str]:
    env = {k: os.environ[k] for k in _PASSED_ON if os.environ.get(k)}
    env.update({
        "VAULTGRAPH_NEO4J_URI": target.uri,
        "VAULTGRAPH_NEO4J_USER": target.user,
        "VAULTGRAPH_NEO4J_PASSWORD": target.password,
        "VAULTGRAPH_KEK": new_kek(),
        # Other sessions' tenants, under their own throwaway keys, may be in the database.
        "VAULTGRAPH_SHARED_DATABASE": "true",
        "VAULTGRAPH_LOG_LEVEL": "WARNING",
    })
    return env


@contextlib.contextmanager
def running_vault(mode: str = "local") -> Iterator[Vault]:
    from ..client import Client

    with SOURCES[mode]() as target, ServiceProcess(service_env(target)) as service:
        tenant = service.create_tenant("pytest")
        with Client(service.url, tenant.key) as client:
            yield Vault(url=service.url, tenant_id=tenant.tenant_id,
                        application_id=tenant.application_id, admin_key=tenant.key,
                        client=client, service=service)
