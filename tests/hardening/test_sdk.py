"""Issue #18.1: the public Basis Theory JS SDK (npm, 1.79.3) drives the service unmodified —
create, retrieve, update, list (by metadata, by ids, page by page: each answer exact),
associations, children, delete (`tests/sdk/sdk_check.mjs`).
`make test` installs its locked dependencies (`npm ci`); Node comes from Debian's packages."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

from .conftest import wait_ready

SDK_DIR = Path(__file__).resolve().parent.parent / "sdk"


async def test_the_basis_theory_js_sdk_works_against_the_service(serve, tenant):
    node = shutil.which("node")
    assert node, "Node.js is missing: `make test` installs it (Debian's nodejs and npm)"
    if not (SDK_DIR / "node_modules" / "@basis-theory" / "basis-theory-js").exists():
        npm = await asyncio.create_subprocess_exec(
            "npm", "ci", "--no-audit", "--no-fund", cwd=SDK_DIR,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await npm.communicate()
        assert npm.returncode == 0, err.decode()[-2000:]
    served = await serve()
    await wait_ready(served)
    proc = await asyncio.create_subprocess_exec(
        node, "sdk_check.mjs", cwd=SDK_DIR,
        env={**os.environ, "VAULTGRAPH_URL": f"http://127.0.0.1:{served.port}",
             "VAULTGRAPH_KEY": tenant.key},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["ok"] is True
    # The SDK's own paths, trailing slashes included, reached the service.
    assert "POST /tokens/" in report["requests"]
    assert any(r.startswith("GET /tokens/") and r.endswith("/children")
               for r in report["requests"])
