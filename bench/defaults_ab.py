"""The default set-up against the benchmark's, one difference at a time (docs/performance.md,
The default set-up): `make run` as a user starts it — `vaultgraph serve --local-neo4j
--workers 0` with the settings' defaults, its output on a terminal — measured the way a person
load-tests it by hand: `wrk -t2 -c32 -d20s` with a script that makes each request as it sends
it (`bench/wrk_each.lua`), three discarded warm-up rounds, then four measured rounds. Each
variant changes ONE thing from that (the benchmark's Neo4j memory, a worker per CPU, output to a
file, no log line a request, one wrk thread, the benchmark's prepared request pool, 100,000
tokens loaded), and
`bench-setup` changes all of the benchmark's at once, so the figure `make bench` reports is
reproduced in the same run.

Each variant has its own Neo4j (started by its service, as `make run` starts it) with its own
home under `.vaultgraph/defaults-ab/<variant>/` (wiped at every start) and its own ports, so its
store grows with its own requests only: nothing here touches 7687, the tests' 7688 or the
benchmark's 7689. Every variant's processes run from the start to the end; rounds alternate
between variants (the order rotating each round) so they share the machine's state.

Reported per variant and workload (create: `POST /tokens`, a new card each time; get:
`GET /tokens/{id}` of a random stored token, masked; with BENCH_DEFAULTS_AB_WORKLOADS naming
it, list: a page of 50 by a customer's metadata): the medians over the measured rounds of
requests per second, p50 and p99 (wrk's), CPU milliseconds per request of the service, Neo4j
and the load generator (from /proc), bytes the service wrote to its output per request, and
req/s against `defaults`; written to `bench/results/defaults-ab-latest.json` and a dated copy.

    .venv/bin/python -m bench.defaults_ab
    BENCH_DEFAULTS_AB_VARIANTS=defaults,worker-per-cpu BENCH_DEFAULTS_AB_DURATION=5 ...
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pty
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from vaultgraph.catalog import Catalog
from vaultgraph.crypto import KeyRing
from vaultgraph.neo4j_local import LocalNeo4j, port_in_use
from vaultgraph.repository.database import Database
from vaultgraph.settings import PROJECT_ROOT, available_cpus, workers_beside_neo4j

from . import cpu
from .config import ROOT
from .dataset import PER_CUSTOMER, Tenant, create_bench_tenant, load_tokens
from .environment import (
    UNAUDITED,
    UNWAITED,
    first_on_path,
    interrupt,
    say,
    stop_leftovers,
    unwind_on_sigterm,
)
from .loadgen import Wrk, ensure_wrk, run_wrk
from .run import provenance, write_results
from .stats import Result
from .workloads import WORKLOADS, Context

EACH_LUA = Path(__file__).resolve().parent / "wrk_each.lua"
WORKLOAD_NAMES = ("create", "get", "list")  # those BENCH_DEFAULTS_AB_WORKLOADS may name


@dataclass(frozen=True)
class Settings:
    """BENCH_DEFAULTS_AB_* (docs/performance.md)."""

    variants: str = ""            # comma-separated subset of VARIANTS; empty: all
    workloads: str = "create,get"  # comma-separated, of WORKLOAD_NAMES
    rounds: int = 4               # measured rounds
    warmup_rounds: int = 3        # discarded rounds before them
    duration: int = 20            # seconds of wrk per variant, workload and round
    connections: int = 32
    tokens: int = 1_000           # tokens loaded for the get workload (the default set-up)
    large_tokens: int = 100_000   # tokens-100k's and bench-setup's
    port: int = 8190              # the services: this port and the next ones
    bolt_port: int = 7871         # the Neo4j servers: these Bolt and HTTP ports and the next
    http_port: int = 7571
    home: str = str(ROOT / ".vaultgraph" / "defaults-ab")
    baseline: str = ""            # a tree of another commit: adds the variant `baseline`
    pythons: str = ""             # venvs' interpreters (comma-separated): a variant for each

    @classmethod
    def from_env(cls, environ=None) -> Settings:
        return settings_from_env(cls, "BENCH_DEFAULTS_AB_", environ)

    def workload_names(self) -> list[str]:
        names = [w.strip() for w in self.workloads.split(",") if w.strip()]
        unknown = sorted(set(names) - set(WORKLOAD_NAMES))
        if unknown or not names:
            raise SystemExit(f"BENCH_DEFAULTS_AB_WORKLOADS: {', '.join(unknown) or 'none'}; "
                             f"name some of {', '.join(WORKLOAD_NAMES)}")
        return names


def settings_from_env(cls, prefix: str, environ=None):
    """A settings dataclass from `prefix` + FIELD environment variables, each converted to its
    default's type; unset or empty: the default."""
    env = os.environ if environ is None else environ
    values = {}
    for f in dataclasses.fields(cls):
        raw = env.get(prefix + f.name.upper())
        if raw:
            values[f.name] = type(f.default)(raw)
    return cls(**values)


@dataclass(frozen=True)
class Variant:
    """A set-up: the Neo4j's memory and data, the service's workers and output, the load."""

    name: str
    change: str
    heap: str = "512m"            # the settings' defaults, as `make run` starts Neo4j
    pagecache: str = "256m"
    large: bool = False           # large_tokens loaded instead of tokens
    workers: int = 0              # make run: half the CPUs beside its local Neo4j
    output: str = "terminal"      # terminal (a pseudo-terminal) or file
    # The service's environment set otherwise: VAULTGRAPH_* settings, or PYTHONPATH for a
    # benchmark-only hook (bench/unaudited, bench/audit_unwaited).
    settings: tuple[tuple[str, str], ...] = ()
    tree: str = ""                # the service's code from this tree (another commit's)
    python: str = ""              # the service under this interpreter: a venv's python with
                                  # vaultgraph installed in it (its `vaultgraph` beside it)
    threads: int = 2              # wrk -t
    load: str = "each"            # each (wrk_each.lua) or pool (the benchmark's wrk_pool.lua)


DEFAULTS = Variant("defaults", "none: make run, wrk -t2 -c32 with a script making each request")


def _setting(name: str, key: str, value: str, why: str) -> Variant:
    """The defaults with one VAULTGRAPH_* setting changed: `key`=`value`, for `why`."""
    return dataclasses.replace(DEFAULTS, name=name, change=f"{key}={value}: {why}",
                               settings=((key, value),))


VARIANTS = {v.name: v for v in (
    DEFAULTS,
    dataclasses.replace(DEFAULTS, name="neo4j-1g-1g", change="Neo4j heap 1g, page cache 1g",
                        heap="1g", pagecache="1g"),
    dataclasses.replace(DEFAULTS, name="worker-per-cpu",
                        change="one service worker per CPU (make run's rule until 2026-12)",
                        workers=available_cpus()),
    dataclasses.replace(DEFAULTS, name="output-file", change="service output to a file",
                        output="file"),
    _setting("log-warning", "VAULTGRAPH_LOG_LEVEL", "WARNING",
             "no log line a request"),
    _setting("audit-wait-2ms", "VAULTGRAPH_AUDIT_BATCH_WAIT", "0.002",
             "an audit batch waits 2 ms at most for requests in flight"),
    _setting("audit-no-wait", "VAULTGRAPH_AUDIT_BATCH_WAIT", "0",
             "an audit batch is written as soon as a lane is free"),
    _setting("audit-lanes-3", "VAULTGRAPH_AUDIT_LANES", "3",
             "three audit chains, so up to three group commits in flight"),
    _setting("audit-lanes-4", "VAULTGRAPH_AUDIT_LANES", "4",
             "four audit chains"),
    _setting("gets-alone", "VAULTGRAPH_GET_BATCH_MAX", "1",
             "every get read alone, as before gets were read together"),
    _setting("get-lanes-1", "VAULTGRAPH_GET_LANES", "1",
             "one read of gets in flight, what waits read together"),
    _setting("create-lanes-1", "VAULTGRAPH_CREATE_LANES", "1",
             "one write of creates in flight, what waits written together"),
    dataclasses.replace(DEFAULTS, name="audit-off",
                        change="the audit trail off (bench/unaudited, a benchmark-only hook)",
                        settings=(("PYTHONPATH", str(UNAUDITED)),)),
    dataclasses.replace(DEFAULTS, name="audit-unwaited",
                        change="a read's answer does not wait for its audit event's commit "
                               "(bench/audit_unwaited, a benchmark-only hook; every event "
                               "still stored)",
                        settings=(("PYTHONPATH", str(UNWAITED)),)),
    dataclasses.replace(DEFAULTS, name="wrk-1-thread", change="wrk -t1", threads=1),
    dataclasses.replace(DEFAULTS, name="wrk-pool",
                        change="the benchmark's prepared request pool (wrk_pool.lua)",
                        load="pool"),
    dataclasses.replace(DEFAULTS, name="tokens-100k", change="large_tokens loaded", large=True),
    dataclasses.replace(DEFAULTS, name="bench-setup",
                        change="all of make bench's: 1g/1g, large_tokens, output to a file, "
                               "wrk -t1 with the pool", heap="1g", pagecache="1g", large=True,
                        output="file", threads=1, load="pool"),
)}


def select(names: str) -> list[Variant]:
    """The variants named (comma-separated; empty: all), `defaults` always first."""
    wanted = [n.strip() for n in names.split(",") if n.strip()] or list(VARIANTS)
    unknown = [n for n in wanted if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"[bench] unknown variant(s) {', '.join(unknown)}; "
                         f"BENCH_DEFAULTS_AB_VARIANTS takes {', '.join(VARIANTS)}")
    ordered = ["defaults"] + [n for n in dict.fromkeys(wanted) if n != "defaults"]
    return [VARIANTS[n] for n in ordered]


def baseline(tree: str) -> list[Variant]:
    """The variant `baseline` when BENCH_DEFAULTS_AB_BASELINE names a tree (another commit's,
    from `git worktree add` or `git archive`): the defaults with the service run from it, so a
    change is measured against its parent under the default set-up."""
    if not tree:
        return []
    if not (Path(tree) / "vaultgraph" / "__init__.py").is_file():
        raise SystemExit(f"[bench] BENCH_DEFAULTS_AB_BASELINE={tree}: no vaultgraph package there")
    return [dataclasses.replace(DEFAULTS, name="baseline", change=f"the service from {tree}",
                                tree=tree)]


def interpreters(pythons: str) -> list[Variant]:
    """A variant `python-<version>` for each interpreter BENCH_DEFAULTS_AB_PYTHONS names (a
    venv's python, vaultgraph installed in that venv): the defaults with the service run under
    it, so Python versions are compared under the default set-up, round by round."""
    out: dict[str, Variant] = {}
    for named in (p.strip() for p in pythons.split(",") if p.strip()):
        python = str(Path(named).absolute())  # the service starts from the checkout's root
        if not Path(python).with_name("vaultgraph").is_file():
            raise SystemExit(f"[bench] BENCH_DEFAULTS_AB_PYTHONS: no vaultgraph beside {python} "
                             "(install it into that venv: <venv>/bin/pip install .)")
        try:
            version = subprocess.run(  # noqa: S603 - an interpreter the caller named
                [python, "-c", "import platform; print(platform.python_version())"],
                capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            raise SystemExit(f"[bench] BENCH_DEFAULTS_AB_PYTHONS: {python} did not run: "
                             f"{exc}") from None
        name = f"python-{version}"
        if name in out:
            raise SystemExit(f"[bench] BENCH_DEFAULTS_AB_PYTHONS: {out[name].python} and "
                             f"{python} are both Python {version}")
        out[name] = dataclasses.replace(DEFAULTS, name=name, python=python,
                                        change=f"the service under Python {version} ({python})")
    return list(out.values())


def rotated(items: list, n: int) -> list:
    """`items` starting at position n (mod its length): round n's order, so that no variant
    always runs first, or always right after another."""
    if not items:
        return []
    k = n % len(items)
    return items[k:] + items[:k]


def _median(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def summarize(rounds: dict[str, dict[str, list[dict]]]) -> dict:
    """Variant → workload → the medians of its measured rounds' figures, and req/s against
    `defaults` (the ratio of the medians)."""
    out: dict = {}
    for variant, workloads in rounds.items():
        out[variant] = {}
        for workload, samples in workloads.items():
            row = {key: _median([s[key] for s in samples])
                   for key in ("rps", "p50_ms", "p99_ms", "output_bytes_per_request")}
            row["errors"] = sum(s["errors"] for s in samples)
            groups = sorted({g for s in samples for g in (s["cpu_ms"] or {})})
            row["cpu_ms"] = {g: _median([(s["cpu_ms"] or {}).get(g) for s in samples])
                             for g in groups}
            out[variant][workload] = row
    base = out.get("defaults", {})
    for workloads in out.values():
        for workload, row in workloads.items():
            ref = base.get(workload, {}).get("rps")
            row["vs_defaults"] = (round(row["rps"] / ref, 3)
                                  if ref and row["rps"] is not None else None)
    return out


def table(summary: dict) -> str:
    lines = ["| variant | workload | req/s | vs defaults | p50 ms | p99 ms | service CPU ms | "
             "Neo4j CPU ms | wrk CPU ms | output B/req | errors |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]

    def fmt(v, spec=".3f"):
        return "-" if v is None else format(v, spec)

    for variant, workloads in summary.items():
        for workload, r in workloads.items():
            c = r["cpu_ms"]
            lines.append(
                f"| {variant} | {workload} | {fmt(r['rps'], '.0f')} | {fmt(r['vs_defaults'])} | "
                f"{fmt(r['p50_ms'], '.1f')} | {fmt(r['p99_ms'], '.1f')} | "
                f"{fmt(c.get('service'))} | {fmt(c.get('neo4j'))} | {fmt(c.get('loadgen'))} | "
                f"{fmt(r['output_bytes_per_request'], '.0f')} | {r['errors']} |")
    return "\n".join(lines)


# -- processes ------------------------------------------------------------------------------

class Output:
    """Where a service writes: a pseudo-terminal this process drains (as a terminal would show
    it), or a file. Counts the bytes written."""

    def __init__(self, kind: str, path: Path):
        self.kind, self.path = kind, path
        self.drained = 0
        self._master: int | None = None
        self._thread: threading.Thread | None = None
        self._tail = b""

    def open(self) -> int:
        """The file descriptor the child gets as stdout and stderr."""
        if self.kind == "file":
            return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._master, child = pty.openpty()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()
        return child

    def _drain(self) -> None:
        master = self._master  # close() clears it while this may still be reading
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child side closed, or close() did
                return
            if not chunk:
                return
            self.drained += len(chunk)
            self._tail = (self._tail + chunk)[-4096:]

    def tail(self) -> str:
        """The last lines written: for a message when the service fails to start."""
        if self.kind == "file":
            try:
                return self.path.read_bytes()[-4096:].decode(errors="replace")
            except OSError:
                return ""
        return self._tail.decode(errors="replace")

    def written(self) -> int:
        if self.kind == "file":
            try:
                return self.path.stat().st_size
            except OSError:
                return 0
        return self.drained

    def close(self) -> None:
        if self._master is not None:
            os.close(self._master)
            self._master = None


@dataclass
class Neo4jStack:
    """One Neo4j home: its ports, the data loaded into it, the services sharing it."""

    home: Path
    bolt_port: int
    http_port: int
    heap: str
    pagecache: str
    tenant: Tenant | None = None
    ids: list[str] = field(default_factory=list)

    def local(self) -> LocalNeo4j:
        return LocalNeo4j(home=self.home / f"neo4j-{self.bolt_port}",
                          lib_dir=self.home / "neo4j-lib", bolt_port=self.bolt_port,
                          http_port=self.http_port, heap=self.heap, pagecache=self.pagecache)

    def fresh(self) -> None:
        """An empty home: a server left running there by an earlier run is stopped first."""
        local = self.local()
        local.stop()
        stop_leftovers(local.home)
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        jars = ROOT / ".vaultgraph" / "neo4j-lib"
        if jars.exists():  # shared with make run; else the first service fetches them
            (self.home / "neo4j-lib").symlink_to(jars.resolve())

    async def load(self, tokens: int) -> None:
        """The benchmark's tenant and masked-read application, and `tokens` card tokens."""
        local = self.local()
        ring = KeyRing.from_spec((self.home / "kek").read_text().strip())
        db = Database.connect(local.uri, "neo4j", local.resolve_password(),
                              Catalog.load(PROJECT_ROOT / "cypher"), "neo4j")
        try:
            self.tenant = await create_bench_tenant(db, ring)
            self.ids = await load_tokens(db, self.tenant, 0, tokens, 5_000)
            await db.driver.execute_query("CALL db.awaitIndexes(300)", database_="neo4j")
        finally:
            await db.close()


class ServiceProcess:
    """`vaultgraph serve --local-neo4j --workers N` with the defaults: only the home, the
    ports and the rate limits (off, as in the figures compared) are set, and a variant's own
    change (Neo4j's memory, its own settings)."""

    def __init__(self, stack: Neo4jStack, port: int, workers: int, output: Output,
                 settings: tuple[tuple[str, str], ...] = (), tree: str = "",
                 python: str = ""):
        self.stack, self.port, self.workers, self.output = stack, port, workers, output
        self.settings, self.tree, self.python = settings, tree, python
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        # The caller's VAULTGRAPH_* (a test set-up's ports, say) would not be the defaults.
        env = {k: v for k, v in os.environ.items() if not k.startswith("VAULTGRAPH_")}
        env.update({
            "VAULTGRAPH_HOME": str(self.stack.home),
            "VAULTGRAPH_PORT": str(self.port),
            "VAULTGRAPH_NEO4J_BOLT_PORT": str(self.stack.bolt_port),
            "VAULTGRAPH_NEO4J_HTTP_PORT": str(self.stack.http_port),
            "VAULTGRAPH_RATE_LIMIT": "1e9",
            "VAULTGRAPH_RATE_BURST": "1000000000",
        })
        if (self.stack.heap, self.stack.pagecache) != (DEFAULTS.heap, DEFAULTS.pagecache):
            env["VAULTGRAPH_NEO4J_HEAP"] = self.stack.heap
            env["VAULTGRAPH_NEO4J_PAGECACHE"] = self.stack.pagecache
        for name, value in self.settings:  # a hook's folder goes first on the path
            env[name] = first_on_path(value, env.get(name)) if name == "PYTHONPATH" else value
        if self.tree:  # its package and its statements ahead of this checkout's
            tree = Path(self.tree).resolve()
            env["PYTHONPATH"] = first_on_path(tree, env.get("PYTHONPATH"))
            env["VAULTGRAPH_CYPHER_DIR"] = str(tree / "cypher")
        return env

    def start(self) -> None:
        if port_in_use(self.port):
            raise SystemExit(f"[bench] port {self.port} is in use: set BENCH_DEFAULTS_AB_PORT")
        exe = Path(self.python or sys.executable).with_name("vaultgraph")
        out = self.output.open()
        try:
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
                [str(exe), "serve", "--local-neo4j", "--workers", str(self.workers)],
                env=self.env(), stdout=out, stderr=out, stdin=subprocess.DEVNULL, cwd=ROOT,
                start_new_session=True)
        finally:
            os.close(out)

    async def ready(self, within: float = 600.0) -> None:
        """Wait until the service answers /ready (Neo4j started, schema applied, pool warm)."""
        assert self.proc is not None
        deadline = time.monotonic() + within
        while not _ready(self.url + "/ready"):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the service on {self.port} exited with "
                                   f"{self.proc.returncode}; its last output:\n"
                                   f"{self.output.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the service on {self.port} did not become ready in "
                                   f"{within:.0f}s; its last output:\n{self.output.tail()}")
            await asyncio.sleep(0.5)  # a point where Ctrl-C cancels the run
        workers = self.workers or workers_beside_neo4j()
        say(f"service ready on {self.url} (pid {self.proc.pid}, {workers} worker(s), output to "
            f"a {self.output.kind})")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        interrupt(self.proc, within=90)
        self.output.close()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - local http only
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


# -- load ------------------------------------------------------------------------------------

class Load:
    """wrk against one service, as a variant drives it."""

    def __init__(self, wrk: str, variant: Variant, service: ServiceProcess, cfg: Settings,
                 work_dir: Path, place: int = 0):
        """`place`: the variant's place in the run, which keeps its card numbers apart."""
        self.wrk, self.variant, self.service, self.cfg = wrk, variant, service, cfg
        self.work_dir = work_dir / variant.name
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.calls = 0
        stack = service.stack
        self.ids_file = self.work_dir / "ids.txt"
        self.ids_file.write_text("\n".join(stack.ids) + "\n")
        self.pool = Wrk(wrk, service.url, stack.tenant.app_key, cfg.connections,
                        variant.threads, self.work_dir)
        # Card numbers for the pool: past those loaded, and apart for each variant.
        self.context = Context(stack.tenant, stack.ids, catalog=None, driver=None,
                               counter=20_000_000 + 1_000_000 * place)

    def prepare(self, workload: str) -> Callable[[], Awaitable[Result]]:
        """One run of `workload`, its request pool (if any) built now, outside the window."""
        self.calls += 1
        if self.variant.load == "pool":
            w = next(w for w in WORKLOADS if w.name == workload)
            rng = random.Random(f"{workload}-{self.calls}")  # noqa: S311 - request variety
            pool = [w.http(item) for item in w.items(self.context, rng)]
            return lambda: self.pool.run(pool, self.cfg.duration)
        args = {"create": ["create", str(self.calls * 10_000)],
                "get": ["get", str(self.ids_file), str(self.calls)],
                "list": ["list", str(max(1, len(self.context.ids) // PER_CUSTOMER)),
                         str(self.calls)]}[workload]
        return lambda: self._each(args)

    async def _each(self, args: list[str]) -> Result:
        argv = [self.wrk, f"-t{self.variant.threads}", f"-c{self.cfg.connections}",
                f"-d{self.cfg.duration}s", "-s", str(EACH_LUA), self.service.url, "--", *args]
        return await run_wrk(argv, {"BENCH_KEY": self.service.stack.tenant.app_key})


async def measure_window(groups: dict[str, int], run: Callable[[], Awaitable[Result]],
                         reaping: tuple[str, ...] = ()) -> dict:
    """One measured run: wrk's figures and the CPU milliseconds per request of each named
    process tree (`cpu.snapshot`), the `other-*` trees summed as `others`. A group named in
    `reaping` also counts the children its root has reaped (`cpu.reaped_ticks`): a server
    that forks a process a connection and waits for it (PostgreSQL) would otherwise lose a
    closed connection's ticks from its tree."""

    def reaped() -> dict[str, int]:
        return {name: cpu.reaped_ticks(groups[name]) for name in reaping if name in groups}

    def snapshot() -> dict[str, int]:
        # A child reaped after its root's reaped ticks were read and before the process table
        # is would be in neither (and its ticks counted in the next window): read again until
        # no child was reaped meanwhile.
        for _ in range(10):
            first = reaped()
            ticks = cpu.snapshot(groups)
            if reaped() == first:
                break
        for name, spent in first.items():
            ticks[name] += spent
        return ticks

    before = snapshot()
    result = await run()
    after = snapshot()
    spent = cpu.per_request(before, after, result.requests)
    idle = sum(v or 0 for k, v in spent.items() if k.startswith("other-"))
    cpu_ms = {k: v for k, v in spent.items() if not k.startswith("other-")}
    cpu_ms["others"] = round(idle, 3)
    out = {k: v for k, v in result.to_dict().items()
           if k in ("requests", "errors", "seconds", "rps", "p50_ms", "p99_ms", "p999_ms")}
    out["cpu_ms"] = cpu_ms
    return out


# -- the run ---------------------------------------------------------------------------------

class Harness:
    def __init__(self, cfg: Settings, variants: list[Variant]):
        self.cfg, self.variants = cfg, variants
        self.stacks: dict[str, Neo4jStack] = {}         # by variant
        self.services: dict[str, ServiceProcess] = {}
        self.loads: dict[str, Load] = {}
        self.work_dir = Path(cfg.home) / "work"

    def plan(self) -> None:
        """A Neo4j and a service for each variant: a variant's store grows with its own
        requests only, as a user's does (the default page cache is small next to a store the
        audit trail grows by every request, so sharing would tilt the comparison)."""
        home = Path(self.cfg.home)
        for n, v in enumerate(self.variants):
            stack = Neo4jStack(home / v.name, self.cfg.bolt_port + n, self.cfg.http_port + n,
                               v.heap, v.pagecache)
            self.stacks[v.name] = stack
            output = Output(v.output, self.work_dir / f"service-{v.name}.log")
            self.services[v.name] = ServiceProcess(stack, self.cfg.port + n, v.workers, output,
                                                   v.settings, v.tree, v.python)

    async def start(self, wrk: str) -> None:
        shutil.rmtree(self.work_dir, ignore_errors=True)
        self.work_dir.mkdir(parents=True)
        for stack in self.stacks.values():
            stack.fresh()
        for place, v in enumerate(self.variants):
            service = self.services[v.name]
            service.start()
            await service.ready()
            tokens = self.cfg.large_tokens if v.large else self.cfg.tokens
            say(f"{v.name}: loading {tokens:,} tokens into the Neo4j on {service.stack.bolt_port}")
            await service.stack.load(tokens)
            self.loads[v.name] = Load(wrk, v, service, self.cfg, self.work_dir, place)

    def stop(self) -> None:
        for service in reversed(list(self.services.values())):
            try:
                service.stop()
            except Exception as exc:  # stop the others all the same
                say(f"stopping the service on {service.port}: {exc}")
        for stack in self.stacks.values():
            stack.local().stop()

    def groups(self, variant: Variant) -> dict[str, int]:
        """The measured variant's service and Neo4j, this process (the load generator: wrk is
        its child), and every other process tree of the run, so none is counted twice."""
        service = self.services[variant.name]
        neo4j = service.stack.local().running_pid()
        groups = {"service": service.pid, "loadgen": os.getpid()}
        if neo4j is not None:
            groups["neo4j"] = neo4j
        for n, other in enumerate(self.services.values()):
            if other is not service:
                groups[f"other-service-{n}"] = other.pid
        for n, stack in enumerate(self.stacks.values()):
            pid = stack.local().running_pid()
            if pid is not None and pid != neo4j:
                groups[f"other-neo4j-{n}"] = pid
        return groups

    async def measure(self, variant: Variant, workload: str) -> dict:
        service = self.services[variant.name]
        groups = self.groups(variant)
        written = service.output.written()
        run = self.loads[variant.name].prepare(workload)
        out = await measure_window(groups, run)
        out["output_bytes_per_request"] = (
            round((service.output.written() - written) / out["requests"], 1)
            if out["requests"] else None)
        return out

    async def rounds(self) -> dict:
        cfg = self.cfg
        kept: dict[str, dict[str, list[dict]]] = {v.name: {w: [] for w in cfg.workload_names()}
                                                  for v in self.variants}
        total = cfg.warmup_rounds + cfg.rounds
        for n in range(total):
            warm = n < cfg.warmup_rounds
            for workload in cfg.workload_names():
                for v in rotated(self.variants, n):
                    got = await self.measure(v, workload)
                    label = "warm-up" if warm else "measured"
                    say(f"round {n + 1}/{total} ({label}) {v.name:13} {workload:6} "
                        f"{got['rps']:>8} req/s  p50 {got['p50_ms']} ms  p99 {got['p99_ms']} ms"
                        f"  errors {got['errors']}")
                    if not warm:
                        kept[v.name][workload].append(got)
        return kept


async def run(cfg: Settings, variants: list[Variant]) -> dict:
    wrk = ensure_wrk()
    if wrk is None:
        raise SystemExit("[bench] wrk is required (apt-get install wrk)")
    harness = Harness(cfg, variants)
    harness.plan()
    began = time.monotonic()
    out = {**provenance(), "settings": dataclasses.asdict(cfg),
           "variants": {v.name: dataclasses.asdict(v) for v in variants}}
    try:
        await harness.start(wrk)
        kept = await harness.rounds()
    finally:
        harness.stop()
    out["wall_seconds"] = round(time.monotonic() - began)
    out["summary"] = summarize(kept)
    out["rounds"] = kept
    return out


def main() -> int:
    unwind_on_sigterm()
    cfg = Settings.from_env()
    variants = select(cfg.variants) + baseline(cfg.baseline) + interpreters(cfg.pythons)
    say(f"variants: {', '.join(v.name for v in variants)}; {cfg.warmup_rounds} warm-up and "
        f"{cfg.rounds} measured rounds of {cfg.duration}s per variant and workload")
    result = asyncio.run(run(cfg, variants))
    print(table(result["summary"]))
    say(f"written to {write_results(result, 'defaults-ab-')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
