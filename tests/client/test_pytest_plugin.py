"""The `vaultgraph` pytest plugin (vaultgraph/testing/plugin.py), as another project uses it:
pytest runs the sample downstream project in examples/downstream in a subprocess, with this
venv (where the package and its `pytest11` entry point are installed), on the Neo4j of this
run; and a project that does not ask for the fixture pays nothing for it."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlsplit

import neo4j

from vaultgraph.cli.common import local_neo4j
from vaultgraph.settings import PROJECT_ROOT

DOWNSTREAM = PROJECT_ROOT / "examples" / "downstream"


def run_pytest(project: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)
    return result.returncode, result.stdout + result.stderr


def pytest_tenants(settings) -> int:
    """Tenants named "pytest" (the fixture's) in this run's database."""
    with neo4j.GraphDatabase.driver(settings.neo4j_uri, auth=(
            settings.neo4j_user, settings.resolved_neo4j_password())) as driver:
        records, _, _ = driver.execute_query(
            "MATCH (t:Tenant {name: 'pytest'}) RETURN count(t) AS n",
            database_=settings.neo4j_database)
    return records[0]["n"]


def test_the_downstream_project_passes_with_the_fixture(settings, tmp_path):
    """The sample project's own tests (a vault, a tenant, a key and a client, from the fixture
    alone) all pass, with the fixture's default source: a Neo4j of its own. The environment
    names this run's Neo4j (its home and Bolt port), as a developer's shell names `make run`'s;
    the fixture still starts its own server in a temporary home on free ports, stops it and
    removes it, and this run's database gets none of the session's throwaway-key tenants.
    Without the launcher's jars here (the run's Neo4j is not the launcher's) the fixture is
    pointed at the run's URI instead."""
    bolt_port = urlsplit(settings.neo4j_uri).port or 7687
    home = Path(settings.home).resolve()
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "TMPDIR": str(temp), "VAULTGRAPH_HOME": str(home),
           "VAULTGRAPH_NEO4J_BOLT_PORT": str(bolt_port),
           "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password()}
    launcher = local_neo4j(dataclasses.replace(settings, home=str(home),
                                               neo4j_bolt_port=bolt_port))
    running = launcher.running_pid()
    local = (home / "neo4j-lib" / ".complete").exists()
    args = [] if local else ["--vaultgraph-neo4j=uri"]
    if not local:
        env["VAULTGRAPH_NEO4J_URI"] = settings.neo4j_uri
    before = pytest_tenants(settings)
    report = tmp_path / "report.xml"
    code, output = run_pytest(DOWNSTREAM, env, "-s", *args, f"--junitxml={report}")
    assert code == 0, output
    suite = ET.parse(report).getroot().find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": 5, "failures": 0, "errors": 0, "skipped": 0}, output
    assert launcher.running_pid() == running          # this run's server untouched
    if local:
        assert pytest_tenants(settings) == before, output
        started = re.search(r"starting Neo4j \(pid (\d+)\) bolt 127\.0\.0\.1:(\d+)", output)
        assert started and int(started.group(2)) != bolt_port, output
        assert f"stopped Neo4j (pid {started.group(1)})" in output, output
        assert list(temp.glob("vaultgraph-pytest-*")) == []     # its home removed


INERT = '''
import sys

def test_the_plugin_is_there_and_idle(request):
    assert request.config.pluginmanager.hasplugin("vaultgraph")
    assert request.config.getoption("--vaultgraph-neo4j") is None
    loaded = {m for m in sys.modules
              if m.startswith(("vaultgraph.", "neo4j", "httpx"))}
    assert loaded <= {"vaultgraph.testing", "vaultgraph.testing.plugin"}, sorted(loaded)
'''


def test_a_project_that_does_not_ask_for_the_fixture_pays_nothing(tmp_path):
    """Installed, the plugin is loaded by every pytest run in this venv; until a test asks for
    `vaultgraph` it has imported nothing of the service, the client or the driver, started
    nothing and needs no Neo4j or settings."""
    (tmp_path / "test_other.py").write_text(INERT)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    code, output = run_pytest(tmp_path, env, "-q", "-p", "no:schemathesis",
                              "-p", "no:hypothesispytest", "-p", "no:anyio")
    assert code == 0, output
    assert "1 passed" in output


WITHOUT_HTTPX = '''
import sys

sys.modules["httpx"] = None      # as if the `client` extra were not installed


def test_wants_a_vault(vaultgraph):
    pass
'''


def test_without_httpx_the_fixture_names_the_extra_to_install(tmp_path):
    """The plugin comes with the base package, the client it hands out needs httpx (the
    `client` extra): without it the fixture fails at once, saying what to install, before any
    Neo4j or service starts; no bare ModuleNotFoundError."""
    (tmp_path / "test_needs_vault.py").write_text(WITHOUT_HTTPX)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "VAULTGRAPH_HOME": str(tmp_path / "home")}
    code, output = run_pytest(tmp_path, env, "-q", "-p", "no:schemathesis",
                              "-p", "no:hypothesispytest", "-p", "no:anyio")
    assert code == 1, output
    assert "1 error" in output, output
    assert "pip install 'vaultgraph[client]'" in output, output
    assert "ModuleNotFoundError" not in output, output
    assert not (tmp_path / "home").exists()          # nothing started, nothing written
    blocked = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['httpx'] = None; import vaultgraph.client"],
        capture_output=True, text=True, env=env, check=False)
    assert "pip install 'vaultgraph[client]' (in a checkout: pip install -e '.[client]')" in (
        blocked.stderr), blocked.stderr
