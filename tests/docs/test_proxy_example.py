"""docs/proxy.md's worked example runs as written: its Python block, against a live `vaultgraph
serve` on the real Neo4j that lets the vault reach a destination on 127.0.0.1 over http (as the
page says to start it), with `VAULT` and `ADMIN_KEY` set. The block's own asserts check what the
local processor received; the test checks the script ran whole and printed the masked read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from factories import service_env

from vaultgraph.testing.service import ServiceProcess

PAGE = Path(__file__).resolve().parents[2] / "docs" / "proxy.md"
_PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def example() -> str:
    blocks = _PYTHON.findall(PAGE.read_text())
    assert len(blocks) == 1, "docs/proxy.md holds one Python example"
    return blocks[0]


@pytest.fixture(scope="module")
def service(settings):
    env = {**service_env(settings), "VAULTGRAPH_WEBHOOK_ALLOW_HTTP": "true",
           "VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32"}
    with ServiceProcess(env) as running:
        yield running


def test_the_worked_example_runs_as_written(service, tmp_path):
    tenant = service.create_tenant("proxy-docs")
    script = tmp_path / "example.py"
    script.write_text(example())
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                               "VAULT": service.url, "ADMIN_KEY": tenant.key})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "{'number': '424242XXXXXX4242', 'expiration_month': 12, 'expiration_year': 2030}",
        "201 {'charge': 'ch_1', 'status': 'captured', 'last4': '4242'}",
        "4242424242424242"]
