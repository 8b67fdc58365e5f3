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


def test_make_test_installs_everything_the_tests_need():
    plan = planned("test")
    assert "openjdk-17-jre-headless maven" in plan
    assert [what for what in TEST_ONLY if what not in plan] == []
    # The test extra goes over the package's own install, in the same venv.
    assert plan.index("pip install -q -e .\n") < plan.index("pip install -q -e '.[test]'")
