"""A vaultgraph service as a subprocess (`python -m vaultgraph serve`), for tests.

The service runs exactly as in production, on a free loopback port, against the Neo4j the
environment names (VAULTGRAPH_NEO4J_URI / _PASSWORD …) with a key-encryption key generated for
the run unless one is given. Tenants are made with the real CLI (`vaultgraph tenants create`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


class ServiceError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    application_id: str
    key: str = field(repr=False)  # never in a test report's repr


@dataclass
class ServiceProcess:
    env: dict[str, str] = field(repr=False)  # holds the key-encryption key and Neo4j's password
    port: int = field(default_factory=free_port)
    startup_timeout: float = 60.0
    _proc: subprocess.Popen | None = None
    _log: Path | None = None

    @property
    def pid(self) -> int | None:
        """The serving process's id while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        # One process unless `env` asks for more: a test's service starts faster, and `pid`
        # is the process that serves (`vaultgraph serve` defaults to one per CPU).
        return {"VAULTGRAPH_WORKERS": "1", **self.env, "VAULTGRAPH_HOST": "127.0.0.1",
                "VAULTGRAPH_PORT": str(self.port)}

    def start(self) -> ServiceProcess:
        fd, log = tempfile.mkstemp(prefix="vaultgraph-service-", suffix=".log")
        self._log = Path(log)
        with os.fdopen(fd, "wb") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "vaultgraph", "serve"], env=self._env(),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                raise ServiceError(f"vaultgraph serve exited with {self._proc.returncode}; "
                                   f"see {self._log}")
            try:
                with urllib.request.urlopen(f"{self.url}/ready", timeout=2) as r:  # noqa: S310
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServiceError(f"vaultgraph serve not ready in {self.startup_timeout:.0f}s; "
                                   f"see {self._log}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self._log is not None:
            self._log.unlink(missing_ok=True)

    def create_tenant(self, name: str = "test") -> Tenant:
        result = subprocess.run(  # noqa: S603 - fixed argv
            [sys.executable, "-m", "vaultgraph", "tenants", "create", "--name", name],
            env=self._env(), capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0:
            raise ServiceError(f"vaultgraph tenants create failed ({result.returncode})")
        created = json.loads(result.stdout)
        return Tenant(created["tenant_id"], created["application_id"], created["key"])

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
