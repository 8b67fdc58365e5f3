"""A vaultgraph service as a subprocess (`python -m vaultgraph serve`), for tests.

The service runs exactly as in production, on a free loopback port, against the Neo4j the
environment names (VAULTGRAPH_NEO4J_URI / _PASSWORD …) with a key-encryption key generated for
the run unless one is given. Tenants are made with the real CLI (`vaultgraph tenants create`).
"""

from __future__ import annotations

import json
import os
import re
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


# Values of these variables never appear in an error message, whatever the CLI printed.
_SECRET_VARIABLES = ("VAULTGRAPH_KEK", "VAULTGRAPH_NEO4J_PASSWORD")
_API_KEY = re.compile(r"vg_[A-Za-z0-9_-]+")


def cli_cause(output: str, env: dict[str, str]) -> str:
    """The CLI's one-line cause from its stderr (its last `vaultgraph: …` line, else its last
    line), with any secret of `env` and anything shaped like an API key blanked, and bounded:
    it goes into an exception message, which test reports print."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("vaultgraph:")]
    cause = (ours or lines or ["no message"])[-1]
    for name in _SECRET_VARIABLES:
        secret = env.get(name)
        if secret:
            cause = cause.replace(secret, "…")
            for part in secret.replace(",", ":").split(":"):
                if len(part) >= 8:
                    cause = cause.replace(part, "…")
    cause = _API_KEY.sub("vg_…", cause)
    return cause if len(cause) <= 400 else cause[:399] + "…"


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
    # Until /ready: against a Neo4j whose JVM is cold, start-up plans every statement first
    # (53-60 s on a quiet 2-core machine, docs/operations.md); a busy CI runner takes longer.
    # A start that fails still fails at once (the process exits).
    startup_timeout: float = 300.0
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
                code = self._proc.returncode
                self._proc = None
                raise self._failed(f"vaultgraph serve exited with {code}")
            try:
                with urllib.request.urlopen(f"{self.url}/ready", timeout=2) as r:  # noqa: S310
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self._terminate()
                raise self._failed(
                    f"vaultgraph serve not ready in {self.startup_timeout:.0f}s")
            time.sleep(0.2)

    def _failed(self, what: str) -> ServiceError:
        """The start failed: the log is kept for the reader (the message names it; it is no
        longer this object's to delete) and its one-line cause is in the message."""
        log, self._log = self._log, None
        try:
            output = log.read_text(errors="replace")
        except OSError:
            output = ""
        # Only the CLI's own error line: the rest of the log is the service's JSON records.
        if any(line.startswith("vaultgraph:") for line in output.splitlines()):
            what = f"{what}: {cli_cause(output, self._env())}"
        return ServiceError(f"{what}; see {log}")

    def _terminate(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def stop(self) -> None:
        """Stop the service and delete its log (a failed start keeps its log: see `start`)."""
        self._terminate()
        if self._log is not None:
            self._log.unlink(missing_ok=True)
            self._log = None

    def create_tenant(self, name: str = "test") -> Tenant:
        result = subprocess.run(  # noqa: S603 - fixed argv
            [sys.executable, "-m", "vaultgraph", "tenants", "create", "--name", name],
            env=self._env(), capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0:
            # stderr only: stdout is where a created tenant's key would be.
            raise ServiceError(f"vaultgraph tenants create failed ({result.returncode}): "
                               f"{cli_cause(result.stderr, self._env())}")
        created = json.loads(result.stdout)
        return Tenant(created["tenant_id"], created["application_id"], created["key"])

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
