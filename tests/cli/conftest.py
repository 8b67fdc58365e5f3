"""Drive the real `vaultgraph` command (a subprocess) against the suite's Neo4j.

Each test gets its own key-encryption key file, so what the CLI creates is readable by the app
these tests build with the same file, and by nothing else.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from vaultgraph.crypto import KeyRing
from vaultgraph.settings import Settings

VAULTGRAPH = str(Path(sys.executable).with_name("vaultgraph"))


@dataclasses.dataclass
class Result:
    status: int
    stdout: str
    stderr: str

    def json(self):
        return orjson.loads(self.stdout)

    def lines(self) -> list:
        return [orjson.loads(line) for line in self.stdout.splitlines()]


class Cli:
    def __init__(self, env: dict[str, str], cwd: Path):
        self.env = env
        self.cwd = cwd

    def __call__(self, *args: str, env: dict[str, str | None] | None = None,
                 cwd: Path | None = None, timeout: float = 120) -> Result:
        full = dict(self.env)
        for name, value in (env or {}).items():
            if value is None:
                full.pop(name, None)
            else:
                full[name] = value
        proc = subprocess.run([VAULTGRAPH, *args], env=full, cwd=cwd or self.cwd,
                              capture_output=True, text=True, timeout=timeout, check=False)
        return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def kek_file(tmp_path, own_tenants_only) -> Path:
    """A key file of this test's own, version `k1` as `make run` makes it: other tests' `k1`
    tenants are set aside meanwhile (`own_tenants_only`), so the key check of a command that
    wraps keys meets only this test's."""
    path = tmp_path / "kek"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(KeyRing.generate_spec() + "\n")
    return path


@pytest.fixture
def settings(settings, kek_file) -> Settings:
    """The app of these tests reads the same key file as the command (KEK rotation reloads it)."""
    return dataclasses.replace(settings, kek="", kek_file=str(kek_file))


@pytest.fixture
def cli(settings, kek_file, tmp_path) -> Cli:
    """The command in a directory outside the checkout, with the suite's Neo4j settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULTGRAPH_")}
    env.update({
        "VAULTGRAPH_HOME": str(settings.home_path),
        "VAULTGRAPH_NEO4J_URI": settings.neo4j_uri,
        "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password(),
        "VAULTGRAPH_NEO4J_BOLT_PORT": str(settings.neo4j_bolt_port),
        "VAULTGRAPH_NEO4J_HTTP_PORT": str(settings.neo4j_http_port),
        "VAULTGRAPH_KEK_FILE": str(kek_file),
        "VAULTGRAPH_SHARED_DATABASE": "true",
    })
    if settings.cypher_dir:  # the catalog the run reads (a checkout's, not the installed one)
        env["VAULTGRAPH_CYPHER_DIR"] = settings.cypher_dir
    work = tmp_path / "elsewhere"
    work.mkdir()
    return Cli(env, work)


def main_in_process(cli, monkeypatch, *args: str) -> Result:
    """The command run in this process (under the command's settings), so a test can patch what
    it calls; stdout and stderr captured."""
    import io
    import logging
    from contextlib import redirect_stderr, redirect_stdout

    from vaultgraph import cli as command

    for name, value in cli.env.items():
        monkeypatch.setenv(name, value)
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = command.main(list(args))
    finally:
        logging.disable(logging.NOTSET)  # main silences logs for the commands it runs
    return Result(status, out.getvalue(), err.getvalue())


def new_tenant(cli, name: str = "acme", env: dict[str, str | None] | None = None) -> dict:
    """A tenant made by `tenants create`, its answer (ids and key) parsed."""
    result = cli("tenants", "create", "--name", name, env=env)
    assert (result.status, result.stderr) == (0, ""), result.stderr
    return result.json()
