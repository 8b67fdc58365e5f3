# No __init__.py here: a package named `packaging` under tests/ would shadow the library.
"""Starting `vaultgraph serve --local-neo4j` in a home of its own, on free ports."""

from __future__ import annotations

import os
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

from vaultgraph.settings import Settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fresh_home(tmp_path: Path, suite: Settings) -> Path:
    """A new home; the Neo4j jars the suite's launcher already fetched are shared (a link), so
    Maven is not run again."""
    home = tmp_path / "home"
    home.mkdir()
    lib = suite.home_path / "neo4j-lib"
    if (lib / ".complete").exists():
        (home / "neo4j-lib").symlink_to(lib)
    return home


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULTGRAPH_")}
    env.update({
        "VAULTGRAPH_HOME": str(home), "VAULTGRAPH_PORT": str(free_port()),
        "VAULTGRAPH_NEO4J_BOLT_PORT": str(free_port()),
        "VAULTGRAPH_NEO4J_HTTP_PORT": str(free_port()),
        "VAULTGRAPH_NEO4J_HEAP": "256m", "VAULTGRAPH_NEO4J_PAGECACHE": "64m",
        **extra,
    })
    return env


def wait_ready(port: int, proc, timeout: float = 300.0) -> int:
    """Poll /ready until it answers 200 (or the process exits); the last status seen."""
    deadline = time.monotonic() + timeout
    status = 0
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as resp:
                status = resp.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = 0
        if status == 200:
            return status
        time.sleep(1)
    return status


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
