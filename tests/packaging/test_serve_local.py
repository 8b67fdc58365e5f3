"""#18.7: `serve --local-neo4j` that dies during bootstrap stops the Neo4j it started."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from launch_helpers import alive, clean_env, fresh_home

pytestmark = pytest.mark.neo4j_launch
VAULTGRAPH = str(Path(sys.executable).with_name("vaultgraph"))


def test_failed_bootstrap_stops_the_neo4j_it_started(tmp_path, settings):
    env = clean_env(fresh_home(tmp_path, settings), VAULTGRAPH_NEO4J_DATABASE="nosuchdb")
    result = subprocess.run([VAULTGRAPH, "serve", "--local-neo4j"], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=400,
                            check=False)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    uri = f"bolt://127.0.0.1:{env['VAULTGRAPH_NEO4J_BOLT_PORT']}"
    assert lines[-1] == (f"vaultgraph: Neo4j at {uri} has no database 'nosuchdb': set "
                         "VAULTGRAPH_NEO4J_DATABASE to an existing database (Community has "
                         "'neo4j')")
    [pid] = re.findall(r"starting Neo4j \(pid (\d+)\)", result.stderr)
    assert any(line.startswith(f"[neo4j] stopped Neo4j (pid {pid})") for line in lines)
    assert not alive(int(pid))
