"""`vaultgraph neo4j dump|load`: the local server's database to one file and back, the server
stopped (docs/operations.md, "Backup and restore").

One test starts Neo4j servers of its own (two starts, in homes under tmp_path): a vault dumped
in one home and loaded, with its key file, into a new one reads its token back. The others
start none: what is refused is refused before any Neo4j runs."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from factories import free_port

from vaultgraph.app import create_app
from vaultgraph.cli import neo4j as neo4j_cli
from vaultgraph.crypto import KeyRing
from vaultgraph.neo4j_local import ENTRY_POINT, LauncherError
from vaultgraph.settings import Settings

from .conftest import Cli, new_tenant

SECRET = {"secret": "s3cret-kept-in-the-dump"}


@pytest.fixture
def suite() -> Settings:
    """The run's settings as the environment gives them (where the Neo4j jars are, the catalog):
    these tests use none of the suite's database, so none of its tenants is set aside."""
    return Settings.from_env()


def write_key_file(path: Path) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(KeyRing.generate_spec() + "\n")
    return path


@dataclasses.dataclass
class Home:
    """A vaultgraph home of the test's own, on free ports, sharing the suite's Neo4j jars."""

    path: Path
    bolt_port: int
    cli: Cli
    settings: Settings

    @property
    def neo4j_home(self) -> Path:
        return self.path / f"neo4j-{self.bolt_port}"

    @property
    def store(self) -> Path:
        return self.neo4j_home / "data"


def new_home(tmp_path: Path, name: str, suite: Settings, kek: Path) -> Home:
    path = tmp_path / name
    path.mkdir()
    lib = suite.home_path / "neo4j-lib"
    if (lib / ".complete").exists():
        (path / "neo4j-lib").symlink_to(lib)
    bolt, http = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULTGRAPH_")}
    env.update({
        "VAULTGRAPH_HOME": str(path), "VAULTGRAPH_NEO4J_BOLT_PORT": str(bolt),
        "VAULTGRAPH_NEO4J_HTTP_PORT": str(http), "VAULTGRAPH_NEO4J_HEAP": "256m",
        "VAULTGRAPH_NEO4J_PAGECACHE": "64m", "VAULTGRAPH_KEK_FILE": str(kek),
    })
    if suite.cypher_dir:
        env["VAULTGRAPH_CYPHER_DIR"] = suite.cypher_dir
    work = path / "elsewhere"
    work.mkdir()
    settings = dataclasses.replace(
        suite, home=str(path), neo4j_uri=f"bolt://127.0.0.1:{bolt}", neo4j_password="",
        neo4j_bolt_port=bolt, neo4j_http_port=http, kek="", kek_file=str(kek),
        shared_database=False, expiry_sweep_interval=0.0, audit_prune_interval=0.0,
        webhook_poll_interval=0.0, log_level="WARNING",
        request_timeout=60.0)  # a cold Neo4j plans each first statement: seconds on a busy host
    return Home(path, bolt, Cli(env, work), settings)


def store_digest(home: Home) -> dict[str, str]:
    """Every file of the database `neo4j` (store and transaction logs) and its hash."""
    return {str(p.relative_to(home.store)): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in ("databases/neo4j", "transactions/neo4j")
            for p in sorted((home.store / folder).rglob("*")) if p.is_file()}


def one_line(result) -> str:
    assert result.status == 1, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    return result.stderr.splitlines()[-1]


@pytest.mark.neo4j_launch
async def test_a_dump_and_its_key_file_restore_the_vault_in_a_new_home(tmp_path, suite):
    """The operator's procedure end to end: a tenant and a token; the dump refused while the
    server runs; a dump with --stop, the server serving the token again after it; stop, dump
    (never over a file without --force); a load that fails leaves the database there as it
    was; a new home given the dump and the key file serves the token as it was, its audit
    trail verifies; with another key file the restored data opens nothing."""
    kek = write_key_file(tmp_path / "kek")
    a, b = new_home(tmp_path, "a", suite, kek), new_home(tmp_path, "b", suite, kek)
    dump = tmp_path / "backups" / "vault.dump"
    try:
        assert a.cli("neo4j", "start").status == 0
        tenant = new_tenant(a.cli, "backup")
        headers = {"SVC-API-KEY": tenant["key"]}
        async with TestClient(TestServer(create_app(a.settings))) as client:
            resp = await client.post("/tokens", headers=headers, json={
                "type": "token", "data": SECRET, "metadata": {"customer": "C-1"}})
            assert resp.status == 201, await resp.text()
            token = await resp.json()

        pid = a.cli("neo4j", "status").json()["pid"]
        assert one_line(a.cli("neo4j", "dump", "--to", str(dump))) == (
            f"vaultgraph: the local Neo4j is running (pid {pid}) and a dump needs it stopped: "
            "stop it first (vaultgraph neo4j stop; stop the service that uses it before a "
            "load), or pass --stop to stop it for the dump and start it again after")
        assert not dump.parent.exists() or not any(dump.parent.iterdir())
        assert a.cli("neo4j", "status").json()["pid"] == pid  # still running, untouched

        # --stop: the server stopped for the dump and started again, serving as before.
        dumped = a.cli("neo4j", "dump", "--to", str(dump), "--stop")
        assert dumped.status == 0, dumped.stderr
        assert dumped.json() == {"database": "neo4j", "dump": str(dump),
                                 "bytes": dump.stat().st_size, "restarted": True}
        assert a.cli("neo4j", "status").json()["pid"] not in (None, pid)
        async with TestClient(TestServer(create_app(a.settings))) as client:
            resp = await client.get(f"/tokens/{token['id']}", headers=headers)
            assert resp.status == 200, await resp.text()
            assert await resp.json() == token
        assert a.cli("neo4j", "stop").status == 0
        assert stat.S_IMODE(dump.stat().st_mode) == 0o600
        assert f"keep the key file {kek} with it (a restore needs both)" in dumped.stderr
        assert SECRET["secret"] not in dump.read_bytes().decode("latin-1")
        first = dump.read_bytes()

        assert one_line(a.cli("neo4j", "dump", "--to", str(dump))) == (
            f"vaultgraph: {dump} exists: name a new file, or pass --force to replace it")
        forced = a.cli("neo4j", "dump", "--to", str(dump), "--force")
        assert forced.status == 0, forced.stderr
        assert forced.json() == {"database": "neo4j", "dump": str(dump),
                                 "bytes": dump.stat().st_size, "restarted": False}
        assert sorted(p.name for p in dump.parent.iterdir()) == ["vault.dump"]  # no partial

        # Neo4j's own --overwrite-destination deletes the database before reading the dump: a
        # truncated dump would leave nothing. The database is moved aside and moved back.
        truncated = tmp_path / "truncated.dump"
        truncated.write_bytes(first[: len(first) // 2])
        before = store_digest(a)
        assert before
        failed = one_line(a.cli("neo4j", "load", "--force", "--from", str(truncated)))
        assert failed.startswith("vaultgraph: neo4j-admin database load failed (exit 1): ")
        assert failed.endswith(f": see {a.neo4j_home / 'logs' / 'neo4j-admin.log'}")
        assert store_digest(a) == before
        assert sorted(p.name for p in a.store.iterdir()) == ["databases", "server_id",
                                                              "transactions"]
        replaced = a.cli("neo4j", "load", "--force", "--from", str(dump))
        assert replaced.status == 0, replaced.stderr
        assert replaced.json()["replaced"] is True

        # A new machine: the dump and the key file, nothing else.
        loaded = b.cli("neo4j", "load", "--from", str(dump))
        assert loaded.status == 0, loaded.stderr
        assert loaded.json() == {"database": "neo4j", "loaded": str(dump), "replaced": False,
                                 "restarted": False}
        assert b.cli("neo4j", "start").status == 0
        async with TestClient(TestServer(create_app(b.settings))) as client:
            resp = await client.get(f"/tokens/{token['id']}", headers=headers)
            assert resp.status == 200, await resp.text()
            assert await resp.json() == token

        verified = b.cli("audit", "verify")
        assert verified.status == 0, verified.stderr
        census = b.cli("keys", "status", "--json")
        assert census.status == 0, census.stderr
        assert [t["id"] for t in census.json()["tenants"]] == [tenant["tenant_id"]]

        other = write_key_file(tmp_path / "other-kek")
        refused = one_line(b.cli("tenants", "create", "--name", "x",
                                 env={"VAULTGRAPH_KEK_FILE": str(other)}))
        assert "does not open the tenant keys stored in Neo4j" in refused
    finally:
        b.cli("neo4j", "stop")
        a.cli("neo4j", "stop")


# -- refusals, with no Neo4j started ------------------------------------------------------------

@pytest.fixture
def fresh(tmp_path, suite) -> Home:
    """A home with no server and no database (no jars either: nothing here may need them)."""
    home = new_home(tmp_path, "fresh", dataclasses.replace(suite, home=str(tmp_path / "none")),
                    write_key_file(tmp_path / "kek"))
    assert not (home.path / "neo4j-lib").exists()
    return home


@pytest.fixture
def seemingly_running(fresh):
    """A process the launcher takes for the home's server (its pid file and entry point), so
    a refusal is checked without a Neo4j, and a stop that should not happen would end only it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", ENTRY_POINT])
    run = fresh.neo4j_home / "run"
    run.mkdir(parents=True)
    (run / "vaultgraph-neo4j.pid").write_text(f"{proc.pid}\n")
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("action", ["dump", "load"])
def test_refused_while_the_server_runs(fresh, seemingly_running, tmp_path, action):
    source = tmp_path / "in.dump"
    source.write_bytes(b"a dump")
    target = tmp_path / "out.dump"
    argv = ("--to", str(target)) if action == "dump" else ("--force", "--from", str(source))
    assert one_line(fresh.cli("neo4j", action, *argv)) == (
        f"vaultgraph: the local Neo4j is running (pid {seemingly_running.pid}) and a {action} "
        f"needs it stopped: stop it first (vaultgraph neo4j stop; stop the service that uses it "
        f"before a load), or pass --stop to stop it for the {action} and start it again after")
    assert seemingly_running.poll() is None  # not stopped
    assert not target.exists()


def test_a_load_stopped_half_way_keeps_the_server_from_starting(fresh):
    """A load killed after it moved the database aside left a partial store: started on it,
    the server served it, and `serve` bootstrapped a new tenant with a new key in it."""
    aside = fresh.neo4j_home / "data" / ".replaced-by-load"
    (aside / "databases" / "neo4j").mkdir(parents=True)
    assert one_line(fresh.cli("neo4j", "start")) == (
        f"vaultgraph: an interrupted load left the database it replaced in {aside}: move its "
        f"databases/ and transactions/ folders back into {fresh.neo4j_home / 'data'} (or "
        f"delete {aside}), then load or start again")
    assert not (fresh.neo4j_home / "run" / "vaultgraph-neo4j.pid").exists()


def test_dump_never_replaces_a_file_without_force(fresh, tmp_path):
    target = tmp_path / "kept.dump"
    target.write_bytes(b"yesterday's dump")
    assert one_line(fresh.cli("neo4j", "dump", "--to", str(target))) == (
        f"vaultgraph: {target} exists: name a new file, or pass --force to replace it")
    assert target.read_bytes() == b"yesterday's dump"
    assert one_line(fresh.cli("neo4j", "dump", "--to", str(tmp_path))) == (
        f"vaultgraph: {tmp_path} is a directory: name a file for --to (a dump is one file)")


def test_dump_of_a_home_without_a_database(fresh, tmp_path):
    target = tmp_path / "new.dump"
    assert one_line(fresh.cli("neo4j", "dump", "--to", str(target))) == (
        f"vaultgraph: the local Neo4j in {fresh.neo4j_home} has no database 'neo4j' to dump: "
        "start it once (vaultgraph neo4j start), or set VAULTGRAPH_HOME and "
        "VAULTGRAPH_NEO4J_BOLT_PORT to the server's")
    assert not target.exists()


def test_load_replaces_a_database_only_with_force(fresh, tmp_path):
    store = fresh.neo4j_home / "data" / "databases" / "neo4j"
    store.mkdir(parents=True)
    (store / "neostore").write_bytes(b"today's data")
    source = tmp_path / "in.dump"
    source.write_bytes(b"a dump")
    assert one_line(fresh.cli("neo4j", "load", "--from", str(source))) == (
        f"vaultgraph: the local Neo4j in {fresh.neo4j_home} has a database 'neo4j': pass "
        "--force to replace it with the dump")
    assert (store / "neostore").read_bytes() == b"today's data"
    missing = tmp_path / "missing.dump"
    assert one_line(fresh.cli("neo4j", "load", "--from", str(missing))) == (
        f"vaultgraph: {missing} is not a file: name a file vaultgraph neo4j dump wrote")


# -- --stop: the server stopped for the work and started again after ----------------------------

class FakeServer:
    def __init__(self, fails: bool = False):
        self.fails = fails
        self.running = True
        self.calls: list[str] = []

    def running_pid(self):
        return 4242 if self.running else None

    def stop(self) -> bool:
        self.calls.append("stop")
        was, self.running = self.running, False
        return was

    def start(self) -> bool:
        self.calls.append("start")
        self.running = True
        return True

    def has_database(self, database):
        return True

    def _work(self, name: str):
        self.calls.append(name if not self.running else f"{name} while running")
        if self.fails:
            raise LauncherError("neo4j-admin failed", "see the log")

    def dump(self, database, target, *, replace):
        self._work("dump")
        target.write_bytes(b"dump")
        return 4

    def load(self, database, source, *, replace):
        self._work("load")
        return True


@pytest.mark.parametrize("action", ["dump", "load"])
@pytest.mark.parametrize("fails", [False, True], ids=["done", "failed"])
def test_stop_stops_the_server_for_the_work_and_starts_it_again(
        monkeypatch, capsys, suite, tmp_path, action, fails):
    server = FakeServer(fails)
    monkeypatch.setattr(neo4j_cli.common, "local_neo4j", lambda _: server)
    path = tmp_path / "vault.dump"
    if action == "load":
        path.write_bytes(b"dump")
    work = getattr(neo4j_cli, action)
    if fails:
        with pytest.raises(LauncherError):
            work(suite, path, force=True, stop=True)
    else:
        assert work(suite, path, force=True, stop=True) == 0
        assert orjson.loads(capsys.readouterr().out)["restarted"] is True
    assert server.calls == ["stop", action, "start"]
