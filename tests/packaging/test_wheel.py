"""The wheel is the product: built from this checkout, installed into a temporary
venv, it runs from a directory outside the checkout: `--version`, and `serve --local-neo4j`
answering 200 on /ready."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from launch_helpers import alive, clean_env, fresh_home, wait_ready

from vaultgraph.settings import PROJECT_ROOT

pytestmark = pytest.mark.packaging
PIP = [sys.executable, "-m", "pip"]
SKIP_LINKS = ("vaultgraph", "__editable__", "_distutils_hack", "pip", "setuptools")


def shipped_folders(root: Path, package: str) -> set[str]:
    """`package` (at `root`) and every folder under it that holds a file, as package names:
    Python packages and data folders alike (setuptools warns that it would ignore a data
    folder absent from `packages`, and a future release may drop it)."""
    names = {package}
    for path in root.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.parent != root:
            names.add(".".join((package, *path.parent.relative_to(root).parts)))
    return names


def test_every_package_is_listed_for_the_wheel():
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    roots = {"vaultgraph": PROJECT_ROOT / "vaultgraph",
             **{name: PROJECT_ROOT / folder for name, folder in config["package-dir"].items()}}
    on_disk = set().union(*(shipped_folders(root, name) for name, root in roots.items()))
    assert "vaultgraph.cypher.tokens" in on_disk and "vaultgraph.static" in on_disk
    assert set(config["packages"]) == on_disk


def deps_only_venv(target: Path) -> Path:
    """A venv whose dependencies are the project venv's (linked, so nothing is downloaded when
    they are all there), without the project's own editable install."""
    venv.EnvBuilder(with_pip=True, symlinks=True).create(target)
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    deps = target / "deps"
    deps.mkdir()
    for entry in site.iterdir():
        if entry.suffix == ".pth" or entry.name.startswith(SKIP_LINKS):
            continue
        (deps / entry.name).symlink_to(entry)
    [own_site] = (target / "lib").glob("python3*/site-packages")
    (own_site / "project-deps.pth").write_text(f"{deps}\n")
    return target / "bin"


def test_wheel_installs_and_serves_outside_the_checkout(tmp_path, settings):
    dist = tmp_path / "dist"
    built = subprocess.run([*PIP, "wheel", "-q", "--no-deps", "-w", str(dist),
                            str(PROJECT_ROOT)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    [wheel] = dist.glob("vaultgraph-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"vaultgraph/cypher/tokens/create.cypher", "vaultgraph/neo4j_files/pom.xml",
            "vaultgraph/neo4j_files/browser/guide.html"} <= names
    catalog = {p.relative_to(PROJECT_ROOT).as_posix() for p in
               (PROJECT_ROOT / "cypher").rglob("*.cypher")}
    assert {n for n in names if n.endswith(".cypher")} == {f"vaultgraph/{c}" for c in catalog}
    pages = {p.relative_to(PROJECT_ROOT).as_posix() for p in
             (PROJECT_ROOT / "docs").rglob("*.md")}
    assert {n for n in names if n.startswith("vaultgraph/docs/")} == {
        f"vaultgraph/{p}" for p in pages}

    bin_dir = deps_only_venv(tmp_path / "venv")
    installed = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True, text=True, check=False)
    assert installed.returncode == 0, installed.stderr

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    home = fresh_home(tmp_path, settings)
    env = clean_env(home)
    vaultgraph = str(bin_dir / "vaultgraph")
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import vaultgraph; print(vaultgraph.__file__)"],
        cwd=outside, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(tmp_path / "venv")), where.stdout

    version = subprocess.run([vaultgraph, "--version"], cwd=outside, env=env,
                             capture_output=True, text=True, check=False)
    assert (version.returncode, version.stdout) == (0, "vaultgraph 0.1.0\n")
    # The documentation the command points at is the installed copy of the page.
    for command in ([], ["tenants", "create"], ["neo4j", "dump"]):
        helped = subprocess.run([vaultgraph, *command, "--help"], cwd=outside, env=env,
                                capture_output=True, text=True, check=True)
        [pointer] = re.findall(r"[^\s(]+\.md\b", helped.stdout)
        assert pointer.startswith(str(tmp_path.resolve() / "venv")), pointer
        assert Path(pointer).is_file(), pointer

    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen([vaultgraph, "serve", "--local-neo4j"], cwd=outside,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            assert wait_ready(int(env["VAULTGRAPH_PORT"]), proc) == 200, \
                (tmp_path / "serve.log").read_text()[-3000:]
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
    output = (tmp_path / "serve.log").read_text()
    [pid] = re.findall(r"starting Neo4j \(pid (\d+)\)", output)
    assert not alive(int(pid)), "serve left its Neo4j running"
    key = (home / "admin.key").read_text().strip()
    assert key not in output  # the log got the file name, never the key
    assert "\x1b[" not in output  # no terminal colour codes in the log
