"""`make run` installs what running needs and nothing of the tests' (README "Two commands");
`make test` installs all of it. Read from `make -nB` (every recipe printed as from a clean
clone, none run)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from vaultgraph.settings import PROJECT_ROOT

TEST_ONLY = ("nodejs", "npm ci", "chromium", "curl", "'.[test]'")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def planned(target: str) -> str:
    result = subprocess.run(["make", "-nB", "-C", str(PROJECT_ROOT), target],
                            capture_output=True, text=True, check=True, timeout=60)
    return result.stdout


def test_make_run_installs_only_what_running_needs():
    plan = planned("run")
    assert "openjdk-17-jre-headless maven" in plan
    assert "pip install -q -e .\n" in plan
    assert [what for what in TEST_ONLY if what in plan] == []
    assert "vaultgraph serve --local-neo4j" in plan


@pytest.mark.parametrize(("exported", "home"), [(None, ".vaultgraph"),
                                                ("/srv/vault", "/srv/vault")])
def test_make_run_serves_from_an_exported_vaultgraph_home(exported, home):
    """`VAULTGRAPH_HOME=/srv/vault make run` served from ./.vaultgraph, silently."""
    import os

    [line] = [line for line in planned("run").splitlines() if "vaultgraph serve" in line]
    assignment = line.split(" .venv/bin/vaultgraph serve")[0]
    env = {"PATH": os.environ["PATH"], **({"VAULTGRAPH_HOME": exported} if exported else {})}
    shown = subprocess.run(["sh", "-c", f"{assignment} sh -c 'echo \"$VAULTGRAPH_HOME\"'"],
                           env=env, capture_output=True, text=True, check=True, timeout=10)
    assert shown.stdout == f"{home}\n"


def test_make_test_installs_everything_the_tests_need():
    plan = planned("test")
    assert "openjdk-17-jre-headless maven" in plan
    assert [what for what in TEST_ONLY if what not in plan] == []
    # The test extra goes over the package's own install, in the same venv.
    assert plan.index("pip install -q -e .\n") < plan.index("pip install -q -e '.[test]'")
