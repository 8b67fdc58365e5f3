"""A real Neo4j Community 5.26 server on this machine, without Docker.

The jars come from Maven Central (deploy/neo4j/pom.xml, shipped in the package as
`vaultgraph.neo4j_files` with the Browser pack, fetched once into a shared lib folder);
each instance has its own home (conf, data, logs, pid file), so `make run`, `make test`, the
benchmark and tests that stop a server can each use their own instance and ports. A stopped
instance's database is dumped to one file and loaded back with neo4j-admin's own commands, run
from the same jars (docs/operations.md, "Backup and restore").
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from importlib.resources import as_file, files
from importlib.resources.abc import Traversable
from pathlib import Path

import neo4j
from neo4j.exceptions import AuthError, ClientError, ServiceUnavailable

ENTRY_POINT = "org.neo4j.server.CommunityEntryPoint"
# `neo4j-admin` without its launcher script: the command's Java entry point and its `database
# dump|load|info` commands ship in jars the server needs anyway (neo4j-command-line, neo4j-dbms).
ADMIN_ENTRY_POINT = "org.neo4j.cli.AdminTool"
_ADMIN_PROGRESS = re.compile(r"Files: \d+/\d+, data:\s*([\d.]+)%")
# A database name as Neo4j spells one; neo4j-admin reads `*` and `?` as globs over databases.
_DATABASE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]{0,62}")
FILES = files("vaultgraph.neo4j_files")
DEFAULT_POM = FILES / "pom.xml"
# The Neo4j Browser pack (style and guide). Neo4j serves Browser from the `browser/` folder of the
# first classpath entry that has one, so the launcher puts a copy of the Browser jar with the pack
# added under `browser/vaultgraph/` first on the classpath: Browser loads both from its own origin.
BROWSER_PACK = FILES / "browser"
BROWSER_PACK_FILES = ("vaultgraph.grass", "guide.html")
BROWSER_PACK_PATH = "/browser/vaultgraph"
# Added to Browser's page: it may load from and connect to this machine only (Bolt over
# WebSocket included), so it cannot phone home whatever its own settings say.
_LOOPBACK = "127.0.0.1:* localhost:*"
_CSP = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "font-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self' " + " ".join(
        f"{scheme}://{host}" for scheme in ("http", "https", "ws", "wss")
        for host in _LOOPBACK.split()),
))
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{_CSP}"/>'
JVM_FLAGS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-XX:+UseG1GC",
    "-XX:+ExitOnOutOfMemoryError",
)


# Servers this process started, kept so they are waited for (reaped) when stopped.
_CHILDREN: dict[int, subprocess.Popen] = {}


class LauncherError(RuntimeError):
    """The local server cannot start or answer: `cause` and `fix`, one line each."""

    def __init__(self, cause: str, fix: str = "see the message above"):
        super().__init__(f"{cause}: {fix}")
        self.cause = cause
        self.fix = fix


def bind_refusal(host: str, port: int) -> int | None:
    """Why this machine cannot listen on `host`:`port` now, as the errno of a trial bind
    (EADDRINUSE: another process holds the port; EADDRNOTAVAIL: not an address of this
    machine), or None when it can. Without SO_REUSEPORT, so a port shared that way counts as
    held. A host that does not resolve raises `socket.gaierror`."""
    family, kind, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    with socket.socket(family, kind) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return exc.errno
    return None


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    return bind_refusal(host, port) == errno.EADDRINUSE


@contextlib.contextmanager
def _quiet_driver():
    """The driver logs every failed routing attempt while the server boots: not news."""
    logger = logging.getLogger("neo4j")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def say(message: str) -> None:
    print(f"[neo4j] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class LocalNeo4j:
    home: Path
    lib_dir: Path
    bolt_port: int = 7687
    http_port: int = 7474
    password: str | None = None
    heap: str = "512m"
    pagecache: str = "256m"
    pom: Path | Traversable = DEFAULT_POM
    browser_pack: Path | Traversable = BROWSER_PACK

    @property
    def pid_file(self) -> Path:
        return self.home / "run" / "vaultgraph-neo4j.pid"

    @property
    def password_file(self) -> Path:
        return self.home.parent / f"{self.home.name}.password"

    @property
    def uri(self) -> str:
        """A direct connection: the local server is one server, and a routing driver
        (`neo4j://`) would choose among its one address for every connection it lends
        (docs/adr/0032-a-direct-connection-to-the-local-server.md)."""
        return f"bolt://127.0.0.1:{self.bolt_port}"

    # -- jars ---------------------------------------------------------------------------------

    def ensure_jars(self) -> None:
        marker = self.lib_dir / ".complete"
        if marker.exists():
            return
        if shutil.which("mvn") is None or shutil.which("java") is None:
            missing = " and ".join(name for name in ("java", "mvn") if shutil.which(name) is None)
            raise LauncherError(f"{missing} not found on PATH: Java 17+ and Maven fetch Neo4j on "
                                "first start",
                                "install them (apt-get install openjdk-17-jre-headless maven)")
        say(f"first run: fetching Neo4j Community jars from Maven Central into {self.lib_dir} ...")
        started = time.monotonic()
        tmp = self.lib_dir.resolve().with_name(self.lib_dir.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        log = self.lib_dir.resolve().with_name(self.lib_dir.name + ".maven.log")
        # Batch mode, no progress, no colour: the output is for a log file, not a terminal.
        with as_file(self.pom) as pom, open(log, "wb") as out:
            cmd = [
                "mvn", "-B", "-q", "--no-transfer-progress", "-Dstyle.color=never",
                "-f", str(pom), "dependency:copy-dependencies",
                "-DincludeScope=runtime", f"-DoutputDirectory={tmp}",
            ]
            env = {**os.environ, "MAVEN_OPTS": (os.environ.get("MAVEN_OPTS", "")
                                                + " -Djansi.passthrough=false").strip(),
                   "NO_COLOR": "1", "TERM": "dumb"}
            result = subprocess.run(cmd, check=False, stdout=out,  # noqa: S603 - fixed argv
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        if result.returncode != 0:
            raise LauncherError(f"Maven could not fetch the Neo4j jars (exit {result.returncode})",
                                f"see {log}; check network access to Maven Central")
        shutil.rmtree(self.lib_dir, ignore_errors=True)
        tmp.rename(self.lib_dir)
        marker.write_text("ok\n")
        size = sum(p.stat().st_size for p in self.lib_dir.iterdir()) / 2**20
        say(f"fetched {size:.0f} MiB of jars in {time.monotonic() - started:.0f}s")

    # -- configuration ------------------------------------------------------------------------

    def write_conf(self) -> None:
        for sub in ("conf", "data", "logs", "run", "plugins", "import"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        h = self.home.resolve()
        conf = f"""# Written by vaultgraph.neo4j_local at every start: edit the launcher.
server.default_listen_address=127.0.0.1
server.bolt.enabled=true
server.bolt.listen_address=127.0.0.1:{self.bolt_port}
server.bolt.advertised_address=127.0.0.1:{self.bolt_port}
server.http.enabled=true
server.http.listen_address=127.0.0.1:{self.http_port}
server.http.advertised_address=127.0.0.1:{self.http_port}
server.https.enabled=false
server.directories.data={h}/data
server.directories.logs={h}/logs
server.directories.run={h}/run
server.directories.plugins={h}/plugins
server.directories.import={h}/import
dbms.security.auth_enabled=true
dbms.usage_report.enabled=false
{self.browser_conf()}server.memory.heap.initial_size={self.heap}
server.memory.heap.max_size={self.heap}
server.memory.pagecache.size={self.pagecache}
db.transaction.timeout=60s
server.bolt.thread_pool_max_size=400
# No keep-alive hint: with it the Python driver times every socket read (docs/adr/0008).
server.bolt.connection_keep_alive_for_requests=OFF
# Transaction logs beyond 1 GiB are pruned at checkpoints: the default keeps two days of them
# (18 GiB after loading 9.45M tokens filled the benchmark machine's disk; docs/adr/0010).
db.tx_log.rotation.retention_policy=1G size
# A cached plan is kept an hour, not replanned whenever statistics drift (after 10 s by default):
# the audit trail adds a node a request, so statistics never settle and every statement was
# replanned every few minutes, each wave stalling all requests for up to a second
# (docs/adr/0009). The statements whose plan statistics could change name their index instead.
dbms.cypher.min_replan_interval=1h
# One cached plan per statement and parameter types, not one more per size class of each string
# and list parameter (empty, 1, up to 10, up to 100, ...): a first create with one metadata entry
# after many with none, or the first batch of the audit trail of eleven events, each paid a
# second or more of planning; the start-up warm-up cannot plan every combination
# (docs/adr/0025).
internal.cypher.use_parameter_size=false
"""
        (self.home / "conf" / "neo4j.conf").write_text(conf)

    @property
    def pause_log(self) -> Path:
        return self.home / "logs" / "gc.log"

    def pause_log_flag(self) -> str:
        """The JVM logs each collection and each stop of all its threads (a safepoint, with how
        long it held them) to `logs/gc.log`, five files of 20 MiB at most: when every request
        stalls at once, this says whether the database's JVM stopped (docs/operations.md)."""
        return (f"-Xlog:gc,safepoint:file={self.pause_log.resolve()}:uptime,level,tags"
                ":filecount=5,filesize=20m")

    @property
    def browser_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/browser/"

    def browser_conf(self) -> str:
        """Neo4j Browser: no telemetry, crash reports or outgoing connections; the pack on connect.

        client.allow_telemetry=false also turns off Browser's crash reports (it takes both from
        this setting when neo4j.conf sets it); browser.allow_outgoing_connections=false stops it
        fetching anything from the internet; remote content (the style, the guide) is allowed
        from this host only; on connect Browser turns off "connect result nodes" (so HAS_META
        self-loops are not pulled into pictures), loads the style and opens the guide.
        """
        pack = f"http://127.0.0.1:{self.http_port}{BROWSER_PACK_PATH}"
        return (
            "client.allow_telemetry=false\n"
            "server.bolt.telemetry.enabled=false\n"
            "browser.remote_content_hostname_whitelist=127.0.0.1\n"
            "browser.post_connect_cmd=config {autoComplete: false}; "
            f"style {pack}/vaultgraph.grass; guide {pack}/guide.html\n"
        )

    def write_browser_jar(self) -> Path | None:
        """A copy of the Browser jar with the pack and a stricter page policy (None: no pack).

        The copy adds the pack under browser/vaultgraph/ and a Content-Security-Policy meta tag
        to browser/index.html that lets the page load and connect to this machine only: Neo4j
        Community does not declare browser.allow_outgoing_connections (Enterprise only), and
        Browser 5 otherwise asks Google Fonts for its fonts and Sentry for crash reporting before
        it has read the server's settings. Rebuilt when the Browser jar or the pack changes.
        """
        jars = sorted(self.lib_dir.glob("neo4j-browser-*.jar"))
        if not jars or not self.browser_pack.is_dir():
            return None
        source = jars[-1]
        pack = {name: (self.browser_pack / name).read_bytes() for name in BROWSER_PACK_FILES}
        stamp = hashlib.sha256(source.name.encode() + CSP_META.encode())
        for name, content in sorted(pack.items()):
            stamp.update(name.encode() + b"\0" + content)
        target = self.home / "browser" / f"neo4j-browser-vaultgraph-{stamp.hexdigest()[:16]}.jar"
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        for old in target.parent.glob("neo4j-browser-vaultgraph-*.jar"):
            old.unlink()
        tmp = target.with_suffix(".partial")
        # Stored, not compressed: the copy is rebuilt rarely and read by Neo4j once per start.
        with zipfile.ZipFile(source) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as out:
            for info in src.infolist():
                data = src.read(info)
                if info.filename == "browser/index.html":
                    data = data.replace(b'<meta charset="UTF-8"/>',
                                        b'<meta charset="UTF-8"/>' + CSP_META.encode(), 1)
                    if CSP_META.encode() not in data:
                        raise LauncherError("unexpected Neo4j Browser index.html: no charset tag")
                out.writestr(info.filename, data)
            for name, content in pack.items():
                out.writestr(f"browser/vaultgraph/{name}", content)
        tmp.replace(target)
        return target

    def resolve_password(self) -> str:
        if self.password:
            return self.password
        if self.password_file.exists():
            return self.password_file.read_text().strip()
        pw = secrets.token_urlsafe(24)
        self.password_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(pw + "\n")
        say(f"generated the Neo4j password into {self.password_file} (mode 0600)")
        return pw

    # -- process ------------------------------------------------------------------------------

    def running_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        # A recycled pid would not be a java process of ours.
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return pid
        return pid if ENTRY_POINT.encode() in cmdline else None

    def start(self, timeout: float = 180.0) -> bool:
        """Start the server unless it runs; returns True when this call started it. Refused
        while a load that was stopped half-way holds the database it replaced aside: started,
        the server would serve the partial store (and `serve` bootstrap a new tenant in it)."""
        if self.running_pid() is not None:
            self._wait_ready(self.resolve_password(), timeout)
            return False
        self._refuse_after_a_stopped_load()
        for name, port in (("Bolt", self.bolt_port), ("HTTP", self.http_port)):
            if port_in_use(port):
                variable = f"VAULTGRAPH_NEO4J_{name.upper()}_PORT"
                raise LauncherError(f"Neo4j's {name} port {port} is in use by another process",
                                    f"stop that process or set {variable} to a free port")
        self.ensure_jars()
        self.write_conf()
        browser_jar = self.write_browser_jar()
        password = self.resolve_password()
        java = shutil.which("java") or "java"
        classpath = f"{self.lib_dir.resolve()}/*:{(self.home / 'plugins').resolve()}/*"
        if browser_jar is not None:
            classpath = f"{browser_jar.resolve()}:{classpath}"
        argv = [
            java, f"-Xms{self.heap}", f"-Xmx{self.heap}", *JVM_FLAGS, self.pause_log_flag(),
            "-cp", classpath,
            ENTRY_POINT,
            f"--home-dir={self.home.resolve()}",
            f"--config-dir={(self.home / 'conf').resolve()}",
            "--console-mode",
        ]
        log = open(self.home / "logs" / "console.log", "ab")
        started = time.monotonic()
        proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )
        log.close()
        _CHILDREN[proc.pid] = proc
        self.pid_file.write_text(f"{proc.pid}\n")
        say(f"starting Neo4j (pid {proc.pid}) bolt 127.0.0.1:{self.bolt_port}, "
            f"http 127.0.0.1:{self.http_port}")
        try:
            self._wait_ready(password, timeout, proc=proc)
        except BaseException:
            self.stop()
            raise
        say(f"ready in {time.monotonic() - started:.1f}s; "
            f"Browser at {self.browser_url}")
        return True

    def _wait_ready(self, password: str, timeout: float, proc: subprocess.Popen | None = None):
        deadline = time.monotonic() + timeout
        while True:
            if proc is not None and proc.poll() is not None:
                log = self.home / "logs" / "console.log"
                raise LauncherError(f"Neo4j exited with status {proc.returncode} while starting",
                                    f"see {log}")
            try:
                with _quiet_driver():
                    asyncio.run(_ensure_password(self.uri, password))
                return
            except (ServiceUnavailable, OSError):
                pass
            if time.monotonic() > deadline:
                raise LauncherError(f"Neo4j did not answer on Bolt port {self.bolt_port} within "
                                    f"{timeout:.0f}s", f"see {self.home / 'logs'}")
            time.sleep(0.5)

    def stop(self, timeout: float = 60.0) -> bool:
        pid = self.running_pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            _reap(pid)
            time.sleep(0.2)
        else:
            say("Neo4j did not stop in time; killing it")
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
            _reap(pid)
        self.pid_file.unlink(missing_ok=True)
        say(f"stopped Neo4j (pid {pid})")
        return True

    # -- dump and load (neo4j-admin, the server stopped) --------------------------------------

    def database_dirs(self, database: str) -> tuple[Path, Path]:
        """The store and the transaction logs of `database` in this instance's data folder."""
        if not _DATABASE_NAME.fullmatch(database):
            raise LauncherError(f"{database!r} is not a Neo4j database name",
                                "set VAULTGRAPH_NEO4J_DATABASE to a database name (Community "
                                "has 'neo4j')")
        data = self.home / "data"
        return data / "databases" / database, data / "transactions" / database

    def has_database(self, database: str) -> bool:
        return any(folder.is_dir() and any(folder.iterdir())
                   for folder in self.database_dirs(database))

    def admin(self, *args: str, label: str) -> None:
        """Run `neo4j-admin ARGS` on this instance (its conf and data), which must be stopped.

        Neo4j's output goes to `logs/neo4j-admin.log`; its progress is said on stderr every
        10%, prefixed with `label`; a failure is a LauncherError naming Neo4j's own reason."""
        pid = self.running_pid()
        if pid is not None:
            raise LauncherError(f"the local Neo4j is running (pid {pid}) and neo4j-admin needs "
                                "it stopped", "stop it (vaultgraph neo4j stop)")
        self.ensure_jars()
        self.write_conf()
        java = shutil.which("java")
        if java is None:
            raise LauncherError("java not found on PATH: neo4j-admin runs on Java 17+",
                                "install it (apt-get install openjdk-17-jre-headless)")
        # Neo4j reads none of the service's settings (some are secrets): they are left out.
        env = {k: v for k, v in os.environ.items() if not k.startswith("VAULTGRAPH_")}
        env.update(NEO4J_HOME=str(self.home.resolve()),
                   NEO4J_CONF=str((self.home / "conf").resolve()))
        argv = [java, "-XX:+ExitOnOutOfMemoryError", "-cp", f"{self.lib_dir.resolve()}/*",
                ADMIN_ENTRY_POINT, *args]
        log_path = self.home / "logs" / "neo4j-admin.log"
        reason, shown = "", -1
        with open(log_path, "ab") as log:
            log.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S%z')} neo4j-admin "
                      f"{' '.join(args)}\n".encode())
            log.flush()
            proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, close_fds=True)
            try:
                for raw in proc.stdout:
                    log.write(raw)
                    line = raw.decode(errors="replace").strip()
                    progress = _ADMIN_PROGRESS.search(line)
                    if progress:
                        decile = min(int(float(progress[1])) // 10, 10)
                        if decile > shown:
                            shown = decile
                            say(f"{label}: {decile * 10}%")
                    elif line.startswith(("Failed", "ERROR", "Error")) and not reason:
                        reason = line
                status = proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
        if status != 0:
            raise LauncherError(f"neo4j-admin {' '.join(args[:2])} failed (exit {status})"
                                + (f": {reason}" if reason else ""), f"see {log_path}")

    def dump(self, database: str, target: Path, *, replace: bool = False) -> int:
        """Write `database` to the file `target` with `neo4j-admin database dump`, this instance
        stopped; the size written. The dump goes into a new folder beside `target` and is moved
        into place at the end (mode 0600, flushed to disk), so a dump that fails or stops
        half-way leaves `target` as it was; an existing `target` is replaced only with
        `replace`."""
        if not self.has_database(database):
            raise LauncherError(f"the local Neo4j in {self.home} has no database {database!r} "
                                "to dump", "start it once (vaultgraph neo4j start), or set "
                                "VAULTGRAPH_HOME and VAULTGRAPH_NEO4J_BOLT_PORT to the server's")
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial",
                                     dir=target.parent))
        try:
            self.admin("database", "dump", f"--to-path={work}", database,
                       label=f"dump of {database!r}")
            written = work / f"{database}.dump"
            os.chmod(written, 0o600)
            with open(written, "rb") as f:
                os.fsync(f.fileno())
            if replace:
                os.replace(written, target)
            else:
                try:
                    os.link(written, target)  # fails if the name was taken meanwhile
                except FileExistsError:
                    raise LauncherError(f"{target} exists", "name a new file, or pass --force "
                                        "to replace it") from None
            fsync_dir(target.parent)
            return target.stat().st_size
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def load(self, database: str, source: Path, *, replace: bool = False) -> bool:
        """Load the dump file `source` into `database` with `neo4j-admin database load`, this
        instance stopped; True when a database was there and is replaced (only with `replace`).

        The database there is moved aside first, not overwritten by Neo4j (which deletes it
        before it reads the dump, so a truncated dump would leave nothing): when the load
        fails or stops half-way, what it wrote is removed and the database is moved back."""
        pid = self.running_pid()
        if pid is not None:  # before anything is moved
            raise LauncherError(f"the local Neo4j is running (pid {pid}) and neo4j-admin needs "
                                "it stopped", "stop it (vaultgraph neo4j stop)")
        existed = self.has_database(database)
        if existed and not replace:
            raise LauncherError(f"the local Neo4j in {self.home} has a database {database!r}",
                                "pass --force to replace it with the dump")
        self._refuse_after_a_stopped_load()
        aside = self._aside()
        # neo4j-admin reads `<database>.dump` from a folder: a link to the file, in one of ours.
        work = self.home / "run" / f"load-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / f"{database}.dump").symlink_to(source.resolve())
        moves = [(folder, aside / folder.parent.name / folder.name)
                 for folder in self.database_dirs(database)]
        moved: list[tuple[Path, Path]] = []
        loading = False
        try:
            for folder, away in moves:
                if folder.exists():
                    away.parent.mkdir(parents=True, exist_ok=True)
                    folder.rename(away)
                    moved.append((folder, away))
            loading = True
            self.admin("database", "load", f"--from-path={work}", database,
                       label=f"load of {database!r}")
        except BaseException:
            if loading:  # what is there now is the failed load's
                for folder, _ in moves:
                    shutil.rmtree(folder, ignore_errors=True)
            for folder, away in reversed(moved):
                away.rename(folder)
            shutil.rmtree(aside, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(aside, ignore_errors=True)
        return existed

    def _aside(self) -> Path:
        """Where a load moves the database it replaces until it is done."""
        return self.home / "data" / ".replaced-by-load"

    def _refuse_after_a_stopped_load(self) -> None:
        aside = self._aside()
        if aside.exists():
            raise LauncherError(f"an interrupted load left the database it replaced in {aside}",
                                f"move its databases/ and transactions/ folders back into "
                                f"{self.home / 'data'} (or delete {aside}), then load or "
                                "start again")

    def status(self) -> dict:
        """What runs, and where: a running server's HTTP port as its configuration says (it
        was started with that one, whatever this process's settings give)."""
        pid = self.running_pid()
        http = self.running_http_port() if pid is not None else None
        return {
            "running": pid is not None,
            "pid": pid,
            "bolt": f"127.0.0.1:{self.bolt_port}",
            "http": f"http://127.0.0.1:{http or self.http_port}/browser/",
            "home": str(self.home),
        }

    def running_http_port(self) -> int | None:
        """The HTTP port in this instance's configuration, which the running server read when
        it started (None when there is none)."""
        try:
            conf = (self.home / "conf" / "neo4j.conf").read_text()
        except OSError:
            return None
        found = re.search(r"^server\.http\.listen_address=[^\n]*:(\d+)$", conf, re.M)
        return int(found[1]) if found else None


def fsync_dir(path: Path) -> None:
    """A directory's entries flushed to disk (a file renamed or linked into it stays)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _reap(pid: int) -> None:
    proc = _CHILDREN.get(pid)
    if proc is not None:
        if proc.poll() is not None:
            del _CHILDREN[pid]
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


async def _ensure_password(uri: str, password: str) -> None:
    """Connect with the configured password; on a new database change it from the default."""
    async with neo4j.AsyncGraphDatabase.driver(uri, auth=("neo4j", password)) as driver:
        try:
            await driver.verify_connectivity()
            return
        except AuthError:
            pass
    async with neo4j.AsyncGraphDatabase.driver(uri, auth=("neo4j", "neo4j")) as driver:
        try:
            await driver.execute_query(
                "ALTER CURRENT USER SET PASSWORD FROM $old TO $new",
                old="neo4j", new=password, database_="system",
            )
        except AuthError as exc:
            raise LauncherError(
                f"Neo4j at {uri} refuses both the configured password and the initial one",
                "set VAULTGRAPH_NEO4J_PASSWORD to the password of this database") from exc
        except ClientError as exc:
            raise LauncherError(f"could not set the initial Neo4j password ({exc.code})",
                                "see the server's logs") from exc
