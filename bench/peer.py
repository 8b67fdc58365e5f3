"""vaultgraph against a peer: the open-source tokenization service allisson/secrets (Go over
PostgreSQL, an audit row signed and written for every request), on this machine, under the same
load generator (docs/performance.md, Against a peer).

Both run for the whole run. vaultgraph as `make run` starts it (`vaultgraph serve --local-neo4j
--workers 0`, the settings' defaults, its output on a drained pseudo-terminal; rate limits off),
its data set the benchmark's (bench/dataset.py). secrets is built from source (the mirror at
BENCH_PEER_MIRROR, or the checkout at BENCH_PEER_SOURCE) with the installed Go, over a private
PostgreSQL cluster this run creates (initdb; `apt-get install postgresql` when missing), with its
defaults but for the rate limits (off), the database pool (as many idle connections as open
ones, so no request waits on a new PostgreSQL backend) and a local KMS key; its output also on a
drained pseudo-terminal. Its bootstrap is the one its docs give: migrate, a KEK, a client whose
policy allows tokenize and detokenize, a bearer token, a non-deterministic luhn-preserving
tokenization key.

Workloads, made per send by wrk (`-t2 -c32`): create — vaultgraph `POST /tokens` of a new card
(bench/wrk_each.lua), secrets `POST /v1/tokenization/keys/{key}/tokenize` of a new Luhn-valid
card number with the same metadata (bench/wrk_peer.lua); get — vaultgraph `GET /tokens/{id}`
masked, secrets `POST /v1/tokenization/detokenize`, each of a random token of BENCH_PEER_TOKENS
loaded before. Rounds alternate between the two (the order rotating), warm-up rounds discarded.
Reported per service and workload: the medians of req/s, p50, p99 and CPU milliseconds per
request of the service, its database and wrk, and vaultgraph ÷ secrets; written to
bench/results/peer-latest.json and a dated copy.

A third side, `bare` (BENCH_PEER_BARE=1, the default), is the stack's own ceiling: the
benchmark's bare client (bench/workloads.py, as `make bench` runs it) in this process, against
vaultgraph's Neo4j while vaultgraph idles — the same statements, crypto and audit events, with
no HTTP at all and `BENCH_PEER_CONNECTIONS` requests in flight. No service on Python and Neo4j
answers more than it does, so bare ÷ secrets is the most vaultgraph ÷ secrets could reach.

    .venv/bin/python -m bench.peer
    BENCH_PEER_ROUNDS=1 BENCH_PEER_WARMUP_ROUNDS=1 BENCH_PEER_DURATION=5 \
        .venv/bin/python -m bench.peer
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import glob
import json
import os
import pwd
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from vaultgraph.catalog import Catalog
from vaultgraph.crypto import KeyRing
from vaultgraph.neo4j_local import port_in_use
from vaultgraph.repository.database import Database
from vaultgraph.server import settle_heap, tune_gc
from vaultgraph.settings import PROJECT_ROOT, workers_beside_neo4j

from .config import ROOT
from .defaults_ab import (
    DEFAULTS,
    Load,
    Neo4jStack,
    Output,
    ServiceProcess,
    measure_window,
    rotated,
    settings_from_env,
    summarize,
)
from .environment import say, unwind_on_sigterm
from .hotpath_ir import bare_context
from .loadgen import ensure_wrk, run_bare, run_wrk
from .run import bare_op, bare_settings, on_service_loop, provenance, write_results
from .stats import Result
from .workloads import WORKLOADS

PEER_LUA = Path(__file__).resolve().parent / "wrk_peer.lua"
WORKLOAD_NAMES = ("create", "get")
SIDES = ("vaultgraph", "secrets")
BARE = "bare"  # the bench's bare client against vaultgraph's Neo4j: the stack's ceiling
KEY_NAME = "bench-cards"
# Only what the two workloads need: tokenize (encrypt) and detokenize (decrypt).
POLICY = '[{"path":"/v1/tokenization/*","capabilities":["encrypt","decrypt"]}]'
# Read from secrets' cluster at the end: its audit rows and tokens, and the database's own
# statistics of the work done (index scans over its tables, transactions committed).
COUNTED = ("audit_logs", "tokenization_tokens", "index_scans", "commits")
COUNT_ROWS = ("SELECT count(*) AS audit_logs FROM audit_logs;\n"
              "SELECT count(*) AS tokenization_tokens FROM tokenization_tokens;\n"
              "SELECT sum(idx_scan)::bigint AS index_scans FROM pg_stat_user_tables;\n"
              "SELECT xact_commit AS commits FROM pg_stat_database WHERE datname = 'postgres';\n")


@dataclass(frozen=True)
class Settings:
    """BENCH_PEER_* (docs/performance.md)."""

    rounds: int = 4               # measured rounds
    warmup_rounds: int = 3        # discarded rounds before them
    duration: int = 20            # seconds of wrk per service, workload and round
    connections: int = 32
    threads: int = 2
    tokens: int = 1_000           # tokens loaded into each for the get workload
    port: int = 8791              # vaultgraph
    bolt_port: int = 7791         # its Neo4j
    http_port: int = 7591
    secrets_port: int = 8792      # secrets; its metrics on the next port
    pg_port: int = 55432          # the private PostgreSQL cluster
    pg_shared_buffers: str = "256MB"  # Neo4j's page cache as make run starts it
    secrets_idle_connections: int = 25  # its DB_MAX_IDLE_CONNECTIONS (its default: 5)
    source: str = ""              # a secrets checkout to build; empty: a clone of `mirror`
    mirror: str = "https://github.com/allisson/secrets.git"  # a git URL or a local clone
    version: str = "v0.28.0"      # the tag (or commit) built from `mirror`; empty: its HEAD
    bare: int = 1                 # 1: also measure the bare client (the side `bare`)
    home: str = str(ROOT / ".vaultgraph" / "peer")

    @classmethod
    def from_env(cls, environ=None) -> Settings:
        return settings_from_env(cls, "BENCH_PEER_", environ)

    @property
    def sides(self) -> tuple[str, ...]:
        return (*SIDES, BARE) if self.bare else SIDES


def pg_settings(cfg: Settings) -> dict[str, str]:
    """The server settings the cluster starts with (`postgres -c`); everything else is
    PostgreSQL's default: fsync and synchronous_commit on (a commit waits for its WAL flush, as
    Neo4j's waits for its transaction log), max_connections 100, the WAL and checkpoint
    defaults."""
    return {"listen_addresses": "127.0.0.1", "port": str(cfg.pg_port),
            "unix_socket_directories": "", "shared_buffers": cfg.pg_shared_buffers,
            "fsync": "on", "synchronous_commit": "on"}


def secrets_settings(cfg: Settings) -> dict[str, str]:
    """secrets' environment but the KMS and master keys (made at each run)."""
    return {
        "DB_DRIVER": "postgres",
        "DB_CONNECTION_STRING":
            f"postgres://postgres@127.0.0.1:{cfg.pg_port}/postgres?sslmode=disable",
        # Its defaults are 25 open and 5 idle: with 32 connections of load, connections past
        # the fifth would close after each request and open again (a PostgreSQL backend forked
        # each time), a cost of the default pool rather than of the service.
        "DB_MAX_OPEN_CONNECTIONS": "25",
        "DB_MAX_IDLE_CONNECTIONS": str(cfg.secrets_idle_connections),
        "SERVER_HOST": "127.0.0.1",
        "SERVER_PORT": str(cfg.secrets_port),
        "METRICS_PORT": str(cfg.secrets_port + 1),
        "LOG_LEVEL": "info",
        "RATE_LIMIT_ENABLED": "false",
        "RATE_LIMIT_TOKEN_ENABLED": "false",
        "KMS_PROVIDER": "localsecrets",
    }


def luhn(body: str) -> str:
    """`body` with its Luhn check digit appended (as wrk_each.lua and wrk_peer.lua make them)."""
    total = 0
    for pos, ch in enumerate(reversed(body)):
        d = int(ch)
        if pos % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def parse_env_lines(text: str) -> dict[str, str]:
    """KEY=VALUE lines (what `secrets create-master-key` prints), other lines ignored."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("export "):
            line = line[len("export "):]
        key, sep, value = line.partition("=")
        if sep and key.isidentifier() and key.isupper():
            out[key] = value.strip().strip('"').strip("'")
    return out


def json_object_with(text: str, key: str) -> dict:
    """The last JSON object in `text` that holds `key`: a CLI's `--format json` answer (indented
    over several lines) among its JSON log lines."""
    decoder = json.JSONDecoder()
    found = None
    i = text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict) and key in value:
            found = value
        i = text.find("{", end)
    if found is None:
        raise ValueError(f"no JSON object with {key!r} in: {text[-500:]}")
    return found


def single_user_counts(text: str, names: tuple[str, ...]) -> dict[str, int | None]:
    """`name = "N"` lines of a single-user backend's answers (`SELECT count(*) AS name`)."""
    found = dict(re.findall(r'\b1: (\w+) = "(\d+)"', text))
    return {n: int(found[n]) if n in found else None for n in names}


def ratios(summary: dict, side: str = "vaultgraph") -> dict:
    """Per workload, `side`'s figure ÷ secrets': req/s (>= 1.0 is the target), p50, and
    CPU per request of the service (the bare side's: its client), of its database and of
    both."""
    out = {}
    vg, peer = summary.get(side, {}), summary.get("secrets", {})
    for workload in WORKLOAD_NAMES:
        a, b = vg.get(workload), peer.get(workload)
        if not a or not b:
            continue

        def div(x, y):
            return round(x / y, 3) if x is not None and y else None

        def both(row):
            c = row["cpu_ms"]
            if c.get("service") is None or c.get("database") is None:
                return None
            return c["service"] + c["database"]

        out[workload] = {
            "rps": div(a["rps"], b["rps"]),
            "p50_ms": div(a["p50_ms"], b["p50_ms"]),
            "service_cpu_ms": div(a["cpu_ms"].get("service"), b["cpu_ms"].get("service")),
            "database_cpu_ms": div(a["cpu_ms"].get("database"), b["cpu_ms"].get("database")),
            "service_and_database_cpu_ms": div(both(a), both(b)),
        }
    return out


def table(summary: dict, ratio: dict, bare_ratio: dict | None = None) -> str:
    lines = ["| service | workload | req/s | p50 ms | p99 ms | service CPU ms | database CPU ms "
             "| wrk CPU ms | outside CPU ms | output B/req | errors |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]

    def fmt(v, spec=".3f"):
        return "-" if v is None else format(v, spec)

    for workload in WORKLOAD_NAMES:
        for side in (*SIDES, BARE):
            r = summary.get(side, {}).get(workload)
            if r is None:
                continue
            c = r["cpu_ms"]
            lines.append(
                f"| {side} | {workload} | {fmt(r['rps'], '.0f')} | {fmt(r['p50_ms'], '.1f')} | "
                f"{fmt(r['p99_ms'], '.1f')} | {fmt(c.get('service'))} | "
                f"{fmt(c.get('database'))} | {fmt(c.get('loadgen'))} | "
                f"{fmt(c.get('outside'))} | "
                f"{fmt(r.get('output_bytes_per_request'), '.0f')} | {r['errors']} |")
        for name, of in (("vaultgraph", ratio), (BARE, bare_ratio or {})):
            q = of.get(workload)
            if q:
                lines.append(
                    f"| {name} ÷ secrets | {workload} | {fmt(q['rps'])} | "
                    f"{fmt(q['p50_ms'])} | | {fmt(q['service_cpu_ms'])} | "
                    f"{fmt(q['database_cpu_ms'])} | | | | |")
    return "\n".join(lines)


# -- machine-wide CPU ------------------------------------------------------------------------

def machine_ticks() -> int:
    """Busy CPU ticks of the whole machine since boot (/proc/stat: all but idle and iowait;
    guest time is already in user time)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return user + nice + system + irq + softirq + steal


# -- PostgreSQL ------------------------------------------------------------------------------

def find_pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    # Debian's packages keep the server binaries off PATH.
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def ensure_postgres() -> tuple[str, str]:
    """initdb and postgres, installed from Debian's packages when missing (root only)."""
    initdb, server = find_pg_binary("initdb"), find_pg_binary("postgres")
    if (initdb is None or server is None) and shutil.which("apt-get") and os.geteuid() == 0:
        say("installing PostgreSQL from Debian's packages")
        for cmd in (["apt-get", "install", "-y", "-q", "postgresql"],
                    ["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "postgresql"]):
            subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)  # noqa: S603
            initdb, server = find_pg_binary("initdb"), find_pg_binary("postgres")
            if initdb and server:
                break
    if initdb is None or server is None:
        raise SystemExit("[bench] PostgreSQL's initdb and postgres are required "
                         "(apt-get install postgresql)")
    return initdb, server


def pg_account() -> tuple[int, int] | None:
    """(uid, gid) to run PostgreSQL as: it refuses root, so as root the `postgres` account,
    created when missing; None otherwise (run as this user)."""
    if os.geteuid() != 0:
        return None
    try:
        account = pwd.getpwnam("postgres")
    except KeyError:
        say("creating the system account `postgres` to run PostgreSQL as")
        subprocess.run(["useradd", "--system", "--no-create-home",  # noqa: S607
                        "--shell", "/usr/sbin/nologin", "postgres"], check=True)
        account = pwd.getpwnam("postgres")
    return account.pw_uid, account.pw_gid


class Postgres:
    """A private cluster in `home`/postgres on its own port, TCP on 127.0.0.1 only."""

    def __init__(self, cfg: Settings, home: Path):
        self.cfg = cfg
        self.data = home / "postgres"
        self.log_path = home / "postgres.log"
        self.proc: subprocess.Popen | None = None
        self.initdb, self.server = ensure_postgres()
        self.account = pg_account()

    def _as_account(self) -> dict:
        if self.account is None:
            return {}
        uid, gid = self.account
        return {"user": uid, "group": gid, "extra_groups": []}

    def version(self) -> str:
        return subprocess.run([self.server, "--version"], capture_output=True,  # noqa: S603
                              text=True, check=False).stdout.strip()

    def stop_leftover(self) -> None:
        """A server an earlier run left on this data directory (killed hard) is stopped."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        try:
            os.kill(pid, signal.SIGINT)  # fast shutdown
        except ProcessLookupError:
            return
        say(f"stopping a leftover PostgreSQL (pid {pid})")
        for _ in range(300):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.2)

    def fresh(self) -> None:
        self.stop_leftover()
        shutil.rmtree(self.data, ignore_errors=True)
        self.data.mkdir(parents=True)
        self.data.chmod(0o700)
        if self.account is not None:
            os.chown(self.data, *self.account)
        env = {"PATH": os.environ.get("PATH", ""), "LANG": "C"}
        done = subprocess.run(  # noqa: S603 - fixed argv
            [self.initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--no-locale"], env=env, cwd="/", capture_output=True, text=True,
            **self._as_account())
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}): {done.stdout[-1000:]}"
                               f"{done.stderr[-2000:]}")

    def start(self, within: float = 120.0) -> None:
        argv = [self.server, "-D", str(self.data)]
        for key, value in pg_settings(self.cfg).items():
            argv += ["-c", f"{key}={value}"]
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
                argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd="/",
                env={"PATH": os.environ.get("PATH", ""), "LANG": "C"}, start_new_session=True,
                **self._as_account())
        finally:
            os.close(log)
        deadline = time.monotonic() + within
        while b"ready to accept connections" not in self.log_path.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not start; its log:\n"
                                   + self.log_path.read_text(errors="replace")[-2000:])
            time.sleep(0.2)
        say(f"PostgreSQL ready on 127.0.0.1:{self.cfg.pg_port} (pid {self.proc.pid})")

    def count_rows(self) -> dict[str, int | None]:
        """COUNTED, read by a single-user backend once the server has stopped (no client
        program needed; a stopped server has written its statistics out)."""
        done = subprocess.run(  # noqa: S603 - fixed argv
            [self.server, "--single", "-D", str(self.data), "postgres"], input=COUNT_ROWS,
            capture_output=True, text=True, cwd="/",
            env={"PATH": os.environ.get("PATH", ""), "LANG": "C"}, **self._as_account())
        return single_user_counts(done.stdout, COUNTED)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)  # fast shutdown: the backends end, then it
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- allisson/secrets ------------------------------------------------------------------------

class Secrets:
    """The peer: built from source, bootstrapped by its CLI, served from the same binary."""

    def __init__(self, cfg: Settings, home: Path, output: Output):
        self.cfg, self.home, self.output = cfg, home, output
        self.run_dir = home / "secrets-run"  # its working directory: no .env above it
        self.binary = home / "bin" / "secrets"
        self.url = f"http://127.0.0.1:{cfg.secrets_port}"
        self.keys: dict[str, str] = {}
        self.source: Path | None = None
        self.commit: str | None = None
        self.go_version = ""
        self.proc: subprocess.Popen | None = None
        self.bearer = ""
        self.tokens: list[str] = []
        self.batches = 0

    def build(self) -> None:
        go = shutil.which("go")
        if go is None:
            raise SystemExit("[bench] Go is required to build allisson/secrets "
                             "(its go.mod names the version)")
        if self.cfg.source:
            source = Path(self.cfg.source)
        else:
            source = self.home / "secrets-src"
            shutil.rmtree(source, ignore_errors=True)
            subprocess.run(["git", "clone", "--quiet", self.cfg.mirror,  # noqa: S603, S607
                            str(source)], check=True)
            if self.cfg.version:
                subprocess.run(["git", "checkout", "--quiet", self.cfg.version],  # noqa: S603, S607
                               cwd=source, check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source,  # noqa: S607
                                capture_output=True, text=True, check=False)
        self.commit = commit.stdout.strip() or None
        self.go_version = subprocess.run([go, "version"], capture_output=True,  # noqa: S603
                                         text=True, check=False).stdout.strip()
        say(f"building allisson/secrets {self.commit or ''} from {source} ({self.go_version})")
        self.source = source
        self.binary.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([go, "build", "-o", str(self.binary), "./cmd/app"],  # noqa: S603
                       cwd=source, check=True)

    def env(self) -> dict[str, str]:
        # Only what it reads from us: none of the caller's environment reaches its settings.
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.run_dir)}
        env.update(secrets_settings(self.cfg))
        env.update(self.keys)
        return env

    def cli(self, *args: str) -> str:
        done = subprocess.run([str(self.binary), *args], env=self.env(),  # noqa: S603
                              cwd=self.run_dir, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"secrets {args[0]} failed ({done.returncode}): "
                               f"{done.stdout[-1000:]}{done.stderr[-2000:]}")
        return done.stdout + "\n" + done.stderr

    def bootstrap(self) -> dict:
        """Keys, schema, KEK, client, tokenization key; the client's credentials."""
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir.mkdir(parents=True)
        # `migrate` reads its migrations from ./migrations.
        assert self.source is not None
        shutil.copytree(self.source / "migrations", self.run_dir / "migrations")
        # URL-safe: the key sits in a URI (a "/" of the standard alphabet breaks it).
        uri = "base64key://" + base64.urlsafe_b64encode(os.urandom(32)).decode()
        self.keys = {"KMS_KEY_URI": uri}
        printed = parse_env_lines(self.cli("create-master-key", "--id", "default",
                                           "--kms-provider", "localsecrets",
                                           "--kms-key-uri", uri))
        self.keys.update({k: printed[k] for k in ("MASTER_KEYS", "ACTIVE_MASTER_KEY_ID")})
        self.cli("migrate")
        self.cli("create-kek", "--algorithm", "aes-gcm")
        client = json_object_with(self.cli("create-client", "--name", "bench", "--active",
                                           "--policies", POLICY, "--format", "json"),
                                  "secret")
        self.cli("create-tokenization-key", "--name", KEY_NAME, "--format", "luhn-preserving",
                 "--algorithm", "aes-gcm")
        return client

    def start(self) -> None:
        out = self.output.open()
        try:
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
                [str(self.binary), "server"], env=self.env(), stdout=out, stderr=out,
                stdin=subprocess.DEVNULL, cwd=self.run_dir, start_new_session=True)
        finally:
            os.close(out)

    async def ready(self, within: float = 120.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + within
        while True:
            try:
                status, _ = http_json(self.url + "/health")
                if status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"secrets did not start; its last output:\n"
                                   f"{self.output.tail()}")
            await asyncio.sleep(0.5)
        say(f"secrets ready on {self.url} (pid {self.proc.pid})")

    def login(self, client: dict) -> None:
        status, body = http_json(self.url + "/v1/token", {
            "client_id": client["client_id"],
            "client_secret": client["secret"]})
        if status != 201 and status != 200:
            raise RuntimeError(f"secrets /v1/token answered {status}: {body}")
        self.bearer = body["token"]

    def load(self, count: int) -> None:
        """`count` tokens of cards whose numbers start with 4 (wrk's start with 5), in batches
        of 100 (its default batch limit)."""
        path = f"{self.url}/v1/tokenization/keys/{KEY_NAME}/tokenize-batch"
        for start in range(0, count, 100):
            items = [{"plaintext": base64.b64encode(luhn(f"4{n:014d}").encode()).decode(),
                      "metadata": {"customer_id": f"cus_{n // 50:07d}", "region": "eu-west"}}
                     for n in range(start, min(count, start + 100))]
            status, body = http_json(path, {"items": items}, self.bearer)
            if status not in (200, 201):
                raise RuntimeError(f"secrets tokenize-batch answered {status}: {body}")
            self.tokens += [item["token"] for item in body["items"]]
            self.batches += 1

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.output.close()


def http_json(url: str, body: dict | None = None, bearer: str = "") -> tuple[int, dict | None]:
    headers = {"Content-Type": "application/json"}
    if bearer:
        headers["Authorization"] = "Bearer " + bearer
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers,  # noqa: S310 - local http
                                 method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - local http only
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, {"error": exc.read()[:500].decode(errors="replace")}


class PeerLoad:
    """wrk against secrets, the requests of wrk_peer.lua."""

    def __init__(self, wrk: str, secrets: Secrets, cfg: Settings, work_dir: Path):
        self.wrk, self.secrets, self.cfg = wrk, secrets, cfg
        self.work_dir = work_dir / "secrets"
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.ids_file = self.work_dir / "tokens.txt"
        self.ids_file.write_text("\n".join(secrets.tokens) + "\n")
        self.calls = 0

    def prepare(self, workload: str):
        self.calls += 1
        args = (["create", KEY_NAME, str(self.calls * 10_000)] if workload == "create"
                else ["get", str(self.ids_file), str(self.calls)])
        return lambda: self._run(args)

    async def _run(self, args: list[str]) -> Result:
        argv = [self.wrk, f"-t{self.cfg.threads}", f"-c{self.cfg.connections}",
                f"-d{self.cfg.duration}s", "-s", str(PEER_LUA), self.secrets.url, "--", *args]
        return await run_wrk(argv, {"BENCH_TOKEN": self.secrets.bearer})


class BareLoad:
    """The bench's bare client against vaultgraph's Neo4j (the side `bare`): each workload's
    statements, crypto and audit events as `make bench`'s bare side sends them, from this
    process, `connections` at a time."""

    def __init__(self, stack: Neo4jStack, cfg: Settings):
        local = stack.local()
        self.cfg = cfg
        self.db = Database.connect(local.uri, "neo4j", local.resolve_password(),
                                   Catalog.load(PROJECT_ROOT / "cypher"), "neo4j")
        ring = KeyRing.from_spec((stack.home / "kek").read_text().strip())
        self.context, self.audit = bare_context(self.db, ring, stack.tenant, stack.ids,
                                                self.db.catalog)
        # Card numbers past those loaded and apart from vaultgraph's (bench/wrk_each.lua).
        self.context.counter = 50_000_000
        self.calls = 0

    async def open(self) -> None:
        """The schema's statements, as `make bench`'s bare side runs them: the process learns
        the server's edition, and on Community its audit batches carry no bookmarks, as the
        service's do not (repository/database.py)."""
        await self.db.apply_schema()

    def prepare(self, workload: str):
        self.calls += 1
        w = next(w for w in WORKLOADS if w.name == workload)
        rng = random.Random(f"bare-{workload}-{self.calls}")  # noqa: S311 - request variety
        items = w.items(self.context, rng)
        return lambda: run_bare(bare_op(w, self.context), items, self.cfg.connections,
                                self.cfg.duration)

    async def close(self) -> None:
        await self.audit.stop()
        await self.context.close()
        await self.db.close()


# -- the run ---------------------------------------------------------------------------------

class Harness:
    def __init__(self, cfg: Settings):
        self.cfg = cfg
        self.home = Path(cfg.home)
        self.work_dir = self.home / "work"
        self.stack = Neo4jStack(self.home / "vaultgraph", cfg.bolt_port, cfg.http_port,
                                DEFAULTS.heap, DEFAULTS.pagecache)
        self.vaultgraph = ServiceProcess(
            self.stack, cfg.port, DEFAULTS.workers,
            Output("terminal", self.work_dir / "vaultgraph.log"))
        self.pg = Postgres(cfg, self.home)
        self.secrets = Secrets(cfg, self.home, Output("terminal", self.work_dir / "secrets.log"))
        self.loads: dict = {}
        self.bare: BareLoad | None = None
        self.sent = dict.fromkeys(cfg.sides, 0)  # requests answered, warm-up rounds included

    async def start(self, wrk: str) -> None:
        for port in (self.cfg.port, self.cfg.secrets_port, self.cfg.secrets_port + 1,
                     self.cfg.pg_port, self.cfg.bolt_port, self.cfg.http_port):
            if port_in_use(port):
                raise SystemExit(f"[bench] port {port} is in use: set BENCH_PEER_*PORT")
        self.home.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o755)  # PostgreSQL's account reaches its data directory through it
        shutil.rmtree(self.work_dir, ignore_errors=True)
        self.work_dir.mkdir(parents=True)
        self.secrets.build()
        self.pg.fresh()
        self.pg.start()
        client = self.secrets.bootstrap()
        self.secrets.start()
        await self.secrets.ready()
        self.secrets.login(client)
        say(f"secrets: loading {self.cfg.tokens:,} tokens")
        self.secrets.load(self.cfg.tokens)
        self.loads["secrets"] = PeerLoad(wrk, self.secrets, self.cfg, self.work_dir)

        self.stack.fresh()
        self.vaultgraph.start()
        await self.vaultgraph.ready()
        say(f"vaultgraph: loading {self.cfg.tokens:,} tokens")
        await self.stack.load(self.cfg.tokens)
        variant = dataclasses.replace(DEFAULTS, threads=self.cfg.threads)
        self.loads["vaultgraph"] = Load(wrk, variant, self.vaultgraph, self.cfg, self.work_dir)
        if self.cfg.bare:
            # This process is then a client as `make bench`'s bare side is: its collector
            # tuned and its heap settled as a serving process's.
            tune_gc(bare_settings())
            self.bare = self.loads[BARE] = BareLoad(self.stack, self.cfg)
            await self.bare.open()
            settle_heap()

    async def close(self) -> None:
        if self.bare is not None:
            await self.bare.close()

    def stop(self) -> None:
        for step in (self.vaultgraph.stop, self.stack.local().stop, self.secrets.stop,
                     self.pg.stop):
            try:
                step()
            except Exception as exc:  # stop the others all the same
                say(f"stopping: {exc}")

    def groups(self, side: str) -> dict[str, int]:
        """The measured side's service and database, this process (wrk is its child), and the
        other side's, idle meanwhile. The bare side's client is this process (its load loop
        included), its database vaultgraph's Neo4j; vaultgraph's service idles."""
        neo4j = self.stack.local().running_pid()
        mine = {"vaultgraph": (self.vaultgraph.pid, neo4j),
                "secrets": (self.secrets.pid, self.pg.pid),
                BARE: (os.getpid(), neo4j)}
        groups = {"service": mine[side][0]}
        if side != BARE:
            groups["loadgen"] = os.getpid()
        if mine[side][1] is not None:
            groups["database"] = mine[side][1]
        idle = ({"vaultgraph": "secrets", "secrets": "vaultgraph"}[side],) if side != BARE \
            else SIDES
        for other in idle:
            groups[f"other-{other}-service"] = mine[other][0]
            if mine[other][1] is not None and mine[other][1] != mine[side][1]:
                groups[f"other-{other}-database"] = mine[other][1]
        return groups

    async def measure(self, side: str, workload: str) -> dict:
        service = {"vaultgraph": self.vaultgraph, "secrets": self.secrets}.get(side)
        written = service.output.written() if service is not None else 0
        run = self.loads[side].prepare(workload)
        busy = machine_ticks()
        # PostgreSQL forks a backend a connection: count the ones it reaped in the window.
        out = await measure_window(self.groups(side), run,
                                   reaping=("database", "other-secrets-database"))
        self.sent[side] += out["requests"]
        busy = machine_ticks() - busy
        n = out["requests"]
        cpu_ms = out["cpu_ms"]
        if n:
            machine_ms = busy * 1000 / os.sysconf("SC_CLK_TCK") / n
            ours = sum(v or 0 for k, v in cpu_ms.items() if k != "neo4j_jit")
            # CPU the machine spent outside this run's processes: other work on the machine.
            cpu_ms["outside"] = round(max(0.0, machine_ms - ours), 3)
        cpu_ms.pop("neo4j_jit", None)
        out["output_bytes_per_request"] = (
            round((service.output.written() - written) / n, 1)
            if n and service is not None else None)
        return out

    async def rounds(self) -> dict:
        cfg = self.cfg
        kept: dict = {s: {w: [] for w in WORKLOAD_NAMES} for s in cfg.sides}
        total = cfg.warmup_rounds + cfg.rounds
        for n in range(total):
            warm = n < cfg.warmup_rounds
            for workload in WORKLOAD_NAMES:
                for side in rotated(list(cfg.sides), n):
                    got = await self.measure(side, workload)
                    label = "warm-up" if warm else "measured"
                    say(f"round {n + 1}/{total} ({label}) {side:10} {workload:6} "
                        f"{got['rps']:>8} req/s  p50 {got['p50_ms']} ms  p99 {got['p99_ms']} ms"
                        f"  errors {got['errors']}  CPU ms/req {got['cpu_ms']}")
                    if not warm:
                        kept[side][workload].append(got)
        return kept


async def run(cfg: Settings) -> dict:
    wrk = ensure_wrk()
    if wrk is None:
        raise SystemExit("[bench] wrk is required (apt-get install wrk)")
    harness = Harness(cfg)
    began = time.monotonic()
    out = {**provenance(), "settings": dataclasses.asdict(cfg),
           "vaultgraph": {"neo4j_heap": DEFAULTS.heap, "neo4j_pagecache": DEFAULTS.pagecache,
                          "workers": workers_beside_neo4j(), "rate_limit": "1e9 (off)",
                          "load": "bench/wrk_each.lua"},
           "secrets": {"env": secrets_settings(cfg), "policy": json.loads(POLICY),
                       "tokenization_key": {"name": KEY_NAME, "format": "luhn-preserving",
                                            "deterministic": False, "algorithm": "aes-gcm"},
                       "load": "bench/wrk_peer.lua"},
           "postgres": {"settings": pg_settings(cfg), "version": harness.pg.version()}}
    try:
        await harness.start(wrk)
        out["secrets"]["commit"] = harness.secrets.commit
        out["secrets"]["go"] = harness.secrets.go_version
        kept = await harness.rounds()
    finally:
        try:
            await harness.close()
        finally:
            harness.stop()
    # What secrets wrote, counted in the stopped cluster: an audit row a request (the loading
    # batches' included; wrk's count leaves out the requests in flight when a run ends).
    rows = harness.pg.count_rows()
    rows["requests_answered"] = answered = harness.sent["secrets"] + harness.secrets.batches
    for key in ("index_scans", "commits"):
        if rows.get(key) is not None and answered:
            rows[f"{key}_per_request"] = round(rows[key] / answered, 2)
    out["secrets"]["rows"] = rows
    say(f"secrets wrote {rows}")
    out["wall_seconds"] = round(time.monotonic() - began)
    out["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    summary = summarize(kept)
    for workloads in summary.values():
        for row in workloads.values():
            row.pop("vs_defaults", None)
    out["summary"] = summary
    out["vaultgraph_over_secrets"] = ratios(summary)
    if cfg.bare:
        out["bare_over_secrets"] = ratios(summary, BARE)
    out["rounds"] = kept
    return out


def main() -> int:
    unwind_on_sigterm()
    cfg = Settings.from_env()
    say(f"vaultgraph against allisson/secrets: {cfg.warmup_rounds} warm-up and {cfg.rounds} "
        f"measured rounds of {cfg.duration}s per service and workload")
    result = on_service_loop(run(cfg))
    print(table(result["summary"], result["vaultgraph_over_secrets"],
                result.get("bare_over_secrets")))
    say(f"written to {write_results(result, 'peer-')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
