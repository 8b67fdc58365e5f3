"""Instructions the service runs per request, counted by valgrind (callgrind): a figure the
machine's other work does not move, for before/after comparisons of the request path on a
shared machine. `python -m bench.hotpath_ir [workload ...]` (default: get create).

Against the Neo4j of VAULTGRAPH_NEO4J_URI / VAULTGRAPH_NEO4J_PASSWORD (the test one will do:
it adds a tenant named "bench" and a few hundred tokens), for each tree (this one, and
HOTPATH_BASELINE=<dir> when set: a tree of another commit, e.g. from `git archive`), it starts
one service worker (`python -m vaultgraph.server`) under callgrind with instrumentation off,
sends HOTPATH_IR_WARMUP requests of the workload one at a time on one keep-alive connection,
switches instrumentation on, sends HOTPATH_IR_REQUESTS more, and reads the instructions counted
(Ir) from callgrind's dump: instructions per request, the driver's and the audit writer's
included (they are the same work in both trees); the service's work on timers is switched off
or made rarer than the run (`Worker`). The bare client (bench/workloads.py: the same statements,
crypto and audit events through the plain driver) is counted the same way, in a process of its
own under callgrind running the same number of operations one at a time, and "added" is the
service's count less the bare client's: what the HTTP layer, the middlewares, validation and
presentation cost a request, in instructions rather than in milliseconds (HOTPATH_IR_BARE=0
skips it). Slow (valgrind runs the service ~50 times slower): a few hundred requests are
enough, the count varies little from run to run. HOTPATH_IR_CONCURRENCY=<n> (default 1)
keeps n requests in flight on both sides instead (n connections, each sending its share in
turn; n coroutines on the bare client, its audit writer batching what is in flight, as the
service's does): whether load adds instructions to a request, beside what it does to their
cost.
The proxy workload gets a destination of its own (bench/destination.py, in this process) and a
proxy to it; the workloads measured with a webhook receiver and the outbox's sender
(`webhook_create`) are refused: `make bench` and `python -m bench.webhooks` measure them. A run
in which any request or operation fails is refused too: it would count the failure's path, not
the workload's.
`callgrind_annotate <file>` on the kept dumps (printed) shows where the instructions go.
Every process counted hashes strings with one seed, HOTPATH_IR_HASH_SEED (default 0; `random`
for a new one each process, as Python does by default): a string's hash decides how far a dict
look-up probes, and a seed drawn per process adds that to the difference between two counts.
It does not remove all of it: each run's ids, keys and times are new (the same tree counted
twice with seed 0: 11.670 and 11.656 M instructions a list, 0.12 % apart). bench/added_profile.py
starts its service worker the same way; its bare side runs in its own process, unpinned.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import http.client
import os
import random
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp

from vaultgraph.catalog import Catalog
from vaultgraph.crypto import KeyRing
from vaultgraph.repository.audit import AuditRepository
from vaultgraph.repository.database import Database
from vaultgraph.server import tune_gc
from vaultgraph.services.audit_writer import AuditWriter
from vaultgraph.settings import PROJECT_ROOT

from .dataset import create_bench_tenant, load_tokens
from .destination import Destination, create_bench_proxy
from .environment import new_kek, say
from .run import bare_op, bare_settings, http_pool, on_service_loop, provenance, write_results
from .workloads import WORKLOADS, Context, Request, Workload

# The bare child's proxy and destination ("<proxy id> <destination URL>"), set by BareWorker.
PROXY_ENV = "HOTPATH_IR_PROXY"

_TOTALS = re.compile(rb"^totals:\s+(\d+)", re.MULTILINE)


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def hash_seed() -> dict[str, str]:
    """The string-hash seed of a counted process, as its environment takes it."""
    return {"PYTHONHASHSEED": _env("HOTPATH_IR_HASH_SEED", "0")}


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/ready", timeout=5) as resp:  # noqa: S310 - local
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def served(argv: list[str], env: dict[str, str], log_path: Path, port: int, what: str):
    """A service process started with `argv` (its output appended to `log_path`), once it
    answers /ready on `port`; stopped when the block ends (SIGINT, killed after 60 s)."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, env=env, cwd=PROJECT_ROOT, stdout=log,  # noqa: S603
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not _ready(f"http://127.0.0.1:{port}"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start; see {log_path}")
            time.sleep(0.5)
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Worker:
    """One service worker under callgrind, instrumentation off until `count` asks."""

    def __init__(self, tree: Path, port: int, kek: str, out: Path):
        self.tree, self.port, self.out = tree, port, out
        self.env = {**os.environ, "VAULTGRAPH_PORT": str(port), "VAULTGRAPH_KEK": kek,
                    "VAULTGRAPH_RATE_LIMIT": "1e9", "VAULTGRAPH_RATE_BURST": "1000000000",
                    "VAULTGRAPH_METRICS_PORT": "0", "VAULTGRAPH_WORKERS": "1",
                    "VAULTGRAPH_HOME": str(out.parent),
                    # Each run's tenant is wrapped under a throwaway KEK of its own: the key
                    # check passes over an earlier run's tenants in the same database.
                    "VAULTGRAPH_SHARED_DATABASE": "true",
                    # Work on a timer is counted per second, not per request: under valgrind a
                    # request takes ~50 times longer, so a timer's share would swamp the
                    # request path's and vary with the machine's load. Off, or rarer than the
                    # run: the webhook sender's poll, the expiry sweep, the authentication
                    # cache's refresh (a look-up a second).
                    "VAULTGRAPH_WEBHOOK_POLL_INTERVAL": "0",
                    "VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "0", "VAULTGRAPH_AUTH_CACHE_TTL": "3600",
                    # The proxy workload's destination is a local, plain-http server.
                    "VAULTGRAPH_WEBHOOK_ALLOW_HTTP": "true",
                    "VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32", **hash_seed()}
        # Its statements, this tree's too: the package's catalog (`vaultgraph.cypher`) is found
        # through the installed distribution, whatever the path, and this tree need not be the
        # installed one (a worktree run with PYTHONPATH, say).
        self.env["VAULTGRAPH_CYPHER_DIR"] = str(tree / "cypher")
        if tree != PROJECT_ROOT:
            self.env["PYTHONPATH"] = str(tree)  # its code
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.out.with_suffix(".log"), "ab")
        self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",  # noqa: S607
             f"--callgrind-out-file={self.out}", sys.executable, "-m", "vaultgraph.server"],
            env=self.env, cwd=self.tree, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 900
        while not _ready(f"http://127.0.0.1:{self.port}"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the service under valgrind did not start; see "
                                   f"{self.out.with_suffix('.log')}")
            time.sleep(1)

    def control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)],  # noqa: S603, S607
                       check=True, capture_output=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _send(conn: http.client.HTTPConnection, key: str, r: Request) -> int:
    headers = {"SVC-API-KEY": key}
    if r.content_type:
        headers["Content-Type"] = r.content_type
    conn.request(r.method, r.path, body=r.body or None, headers=headers)
    resp = conn.getresponse()
    resp.read()
    return resp.status


def _drive(port: int, key: str, pool: list[Request], n: int, connections: int = 1) -> int:
    """`n` requests on `connections` keep-alive connections, each sending its share one after
    another (pool items dealt out in turn); the errors (>= 400)."""
    connections = max(1, connections)

    def one(first: int) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        errors = sum(_send(conn, key, pool[i % len(pool)]) >= 400
                     for i in range(first, n, connections))
        conn.close()
        return errors

    if connections <= 1:
        return one(0)
    with concurrent.futures.ThreadPoolExecutor(connections) as pool_of_threads:
        return sum(pool_of_threads.map(one, range(connections)))


def _instructions(dump_prefix: Path) -> int:
    """Ir counted in the dumps callgrind wrote for `dump_prefix` (one per `-d`, and the last at
    exit): the counting was on only between `-i on` and `-i off`."""
    total = 0
    for path in dump_prefix.parent.glob(dump_prefix.name + "*"):
        if path.suffix == ".log":
            continue
        total += sum(int(n) for n in _TOTALS.findall(path.read_bytes()))
    return total


class BareWorker:
    """The bare client of one workload in a child process under callgrind (`--bare`): it sets
    itself up and warms up uncounted, then counts `requests` operations when told to."""

    def __init__(self, workload: str, kek: str, out: Path, warm: int, requests: int,
                 concurrency: int = 1, proxy: ProxyTarget | None = None):
        self.out = out
        env = {**os.environ, **hash_seed()}
        if proxy is not None and proxy.proxy_id:
            env[PROXY_ENV] = f"{proxy.proxy_id} {proxy.url}"
        with open(out.with_suffix(".log"), "ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
                ["valgrind", "--tool=callgrind", "--instr-atstart=no",  # noqa: S607
                 f"--callgrind-out-file={out}", sys.executable, "-m", "bench.hotpath_ir",
                 "--bare", workload, str(warm), str(requests), str(concurrency)],
                env={**env, "VAULTGRAPH_KEK": kek}, cwd=PROJECT_ROOT, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                start_new_session=True)

    def _expect(self, word: str) -> str:
        line = self.proc.stdout.readline().strip()
        if not line.startswith(word):
            raise RuntimeError(f"the bare client under valgrind said {line!r}; see "
                               f"{self.out.with_suffix('.log')}")
        return line

    def count(self) -> int:
        """Runs the counted operations; their errors. The child is gone when it returns."""
        try:
            return self._count()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def _count(self) -> int:
        self._expect("warm")
        subprocess.run(["callgrind_control", "-i", "on", str(self.proc.pid)],  # noqa: S603, S607
                       check=True, capture_output=True)
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        errors = int(self._expect("done").split()[1])
        for args in (("-i", "off"), ("-d",)):
            subprocess.run(["callgrind_control", *args, str(self.proc.pid)],  # noqa: S603, S607
                           check=True, capture_output=True)
        self.proc.stdin.write("exit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=300)
        return errors


def bare_context(db: Database, ring: KeyRing, tenant, ids: list[str], catalog: Catalog,
                 proxy: ProxyTarget | None = None) -> tuple[Context, AuditWriter]:
    """The bare client's context and its audit writer, set as the bare client of `make bench`;
    with `proxy`'s destination, an HTTP session to it (closed by `close_context`)."""
    defaults = bare_settings()
    audit = AuditWriter.from_settings(AuditRepository(db), ring, defaults)
    ctx = Context(tenant, ids, catalog, db.driver, audit=audit)
    if proxy is not None and proxy.proxy_id:
        ctx.proxy_id, ctx.destination = proxy.proxy_id, proxy.url
        ctx.session = aiohttp.ClientSession()
    return ctx, audit


async def close_context(ctx: Context) -> None:
    await ctx.close()
    if ctx.session is not None:
        await ctx.session.close()


class ProxyTarget:
    """The proxy workload's destination (bench/destination.py, a thread of this process) and
    its proxy in the bench tenant, made only when the workload is selected; or, in the bare
    child, the ones its parent made (PROXY_ENV)."""

    def __init__(self, proxy_id: str = "", url: str = "",
                 destination: Destination | None = None):
        self.proxy_id, self.url, self.destination = proxy_id, url, destination

    @classmethod
    async def open(cls, db: Database, tenant_id: str, names: list[str]) -> ProxyTarget:
        if "proxy" not in names:
            return cls()
        destination = Destination().start()
        try:
            proxy_id = await create_bench_proxy(db, tenant_id, destination.url)
        except BaseException:
            destination.stop()  # no process outlives a run that failed to set up
            raise
        return cls(proxy_id, destination.url, destination)

    @classmethod
    def inherited(cls) -> ProxyTarget:
        proxy_id, _, url = os.environ.get(PROXY_ENV, "").partition(" ")
        return cls(proxy_id, url)

    def close(self) -> None:
        if self.destination is not None:
            self.destination.stop()


def selected(names: list[str]) -> list[Workload]:
    """The workloads named, in the benchmark's order. A name that is no workload, or one
    measured with a webhook receiver and the outbox's sender (which these tools do not start:
    `make bench` and `python -m bench.webhooks` measure it), ends the run with why."""
    known = {w.name: w for w in WORKLOADS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"no such workload: {', '.join(unknown)} (one of "
                         f"{', '.join(known)})")
    refused = [n for n in names if known[n].outbox]
    if refused:
        raise SystemExit(f"{', '.join(refused)}: measured with a webhook receiver and the "
                         "outbox's sender, which this tool does not start (make bench and "
                         "python -m bench.webhooks measure it)")
    return [w for w in WORKLOADS if w.name in names]


def refuse_failures(workload: str, side: str, errors: int, n: int) -> None:
    """A run in which requests failed counted the failures' path, not the workload's."""
    if errors:
        raise SystemExit(f"{workload}: {errors} of {n} {side} failed; nothing is reported "
                         "for a run of failures")


async def run_ops(op, items: list, start: int, n: int, concurrency: int,
                  audit: AuditWriter) -> int:
    """`n` of the bare client's operations on `items` from `start` on (wrapping around), with
    `concurrency` in flight (as many coroutines, each running its share in turn); the
    errors."""
    concurrency = max(1, concurrency)

    async def lane(first: int) -> int:
        errors = 0
        for i in range(first, start + n, concurrency):
            try:
                linked_later = await op(items[i % len(items)])
            except Exception:  # counted, as the service side counts answers >= 400
                errors += 1
                continue
            if concurrency == 1 and linked_later:
                # An event linked with no one waiting (an association's) is batched at once:
                # the service's, one request at a time, is put in a batch of its own before
                # the next request arrives, and so is the bare client's.
                await audit.settle()
        return errors

    # A write event settled by a block (a create's, an update's, a tokenize's) is held for the
    # settle wait (services/audit_writer.py `pin`), which no request waits for: the service's
    # requests one at a time are batched so, and so are the bare client's operations, which
    # settle them once at the end.
    errors = sum(await asyncio.gather(*(lane(start + k) for k in range(concurrency))))
    await audit.settle()
    return errors


async def _bare_child(name: str, warm: int, requests: int, concurrency: int = 1) -> None:
    """`--bare`: the bare client's side of BareWorker, talking on stdin/stdout; `concurrency`
    operations in flight at a time (as many coroutines, each running its share in turn)."""
    tune_gc(bare_settings())  # as make bench's bare client collects its garbage
    db, catalog, _, ring, tenant, ids = await bench_tenant(os.environ["VAULTGRAPH_KEK"])
    ctx, audit = bare_context(db, ring, tenant, ids, catalog, ProxyTarget.inherited())
    w = next(w for w in WORKLOADS if w.name == name)
    op = bare_op(w, ctx)
    items = w.items(ctx, random.Random(w.name))  # noqa: S311 - request variety

    errors = await run_ops(op, items, 0, warm, concurrency, audit)
    print("warm", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    errors += await run_ops(op, items, warm, requests, concurrency, audit)
    print(f"done {errors}", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    await close_context(ctx)
    await audit.stop()
    await db.close()


async def bench_tenant(kek: str | None = None) -> tuple[Database, Catalog, str, KeyRing, object,
                                                        list[str]]:
    """The Neo4j of VAULTGRAPH_NEO4J_URI, a bench tenant under `kek` (by default a key of a
    version of its own: the service's start-up key check looks only at tenants made under it,
    not at those other runs left in a shared database under other keys) and HOTPATH_TOKENS
    tokens: (database, catalog, kek, key ring, tenant, token ids)."""
    catalog = Catalog.load(PROJECT_ROOT / "cypher")
    db = Database.connect(os.environ["VAULTGRAPH_NEO4J_URI"], "neo4j",
                          os.environ["VAULTGRAPH_NEO4J_PASSWORD"], catalog, "neo4j")
    kek = kek or f"hot{secrets.token_hex(4)}:{new_kek().partition(':')[2]}"
    ring = KeyRing.from_spec(kek)
    tenant = await create_bench_tenant(db, ring)
    ids = await load_tokens(db, tenant, 0, int(_env("HOTPATH_TOKENS", "500")), 500)
    return db, catalog, kek, ring, tenant, ids


def _trees() -> dict[str, Path]:
    trees = {"this tree": PROJECT_ROOT}
    if os.environ.get("HOTPATH_BASELINE"):
        trees["baseline"] = Path(os.environ["HOTPATH_BASELINE"]).resolve()
    return trees


async def main(names: list[str]) -> None:
    requests = int(_env("HOTPATH_IR_REQUESTS", "300"))
    warm = int(_env("HOTPATH_IR_WARMUP", "150"))
    concurrency = int(_env("HOTPATH_IR_CONCURRENCY", "1"))
    port = int(_env("HOTPATH_PORT", "8391"))
    workloads = selected(names)
    work = Path(tempfile.mkdtemp(prefix="hotpath-ir-"))
    db, catalog, kek, _, tenant, ids = await bench_tenant()
    proxy = await ProxyTarget.open(db, tenant.tenant_id, names)
    ctx = Context(tenant, ids, catalog, db.driver, proxy_id=proxy.proxy_id)
    await db.close()
    try:
        results = await _count_all(workloads, ctx, kek, work, proxy, requests, warm,
                                   concurrency, port)
    finally:
        proxy.close()
    _report(results, requests, warm, concurrency)


async def _count_all(workloads: list[Workload], ctx: Context, kek: str, work: Path,
                     proxy: ProxyTarget, requests: int, warm: int, concurrency: int,
                     port: int) -> dict[tuple[str, str], float]:
    trees = _trees()
    bare = os.environ.get("HOTPATH_IR_BARE", "1") not in ("0", "false", "no")
    tenant = ctx.tenant
    results: dict[tuple[str, str], float] = {}
    for w in workloads:
        pool = http_pool(w, ctx, random.Random(w.name))  # noqa: S311 - request variety
        for label, tree in trees.items():
            out = work / f"{w.name}-{label.replace(' ', '-')}.callgrind"
            worker = Worker(tree, port, kek, out)
            try:
                worker.start()
                errors = await asyncio.to_thread(_drive, port, tenant.app_key, pool, warm,
                                                 concurrency)
                worker.control("-i", "on")
                errors += await asyncio.to_thread(_drive, port, tenant.app_key, pool[warm:],
                                                  requests, concurrency)
                worker.control("-i", "off")
                worker.control("-d")
            finally:
                worker.stop()
            refuse_failures(w.name, f"requests to {label}", errors, warm + requests)
            per = _instructions(out) / requests
            results[(w.name, label)] = per
            say(f"{w.name}, {label}: {per / 1e6:.3f} M instructions a request "
                f"({requests} requests; {out})")
        if bare:
            out = work / f"{w.name}-bare.callgrind"
            errors = await asyncio.to_thread(
                BareWorker(w.name, kek, out, warm, requests, concurrency, proxy).count)
            refuse_failures(w.name, "bare client operations", errors, warm + requests)
            results[(w.name, "bare client")] = per = _instructions(out) / requests
            say(f"{w.name}, bare client: {per / 1e6:.3f} M instructions an operation "
                f"({requests} operations; {out})")
    return results


def _report(results: dict[tuple[str, str], float], requests: int, warm: int,
            concurrency: int) -> None:
    trees = _trees()
    bare = any(label == "bare client" for _, label in results)
    print(f"\nworkload   tree          M instructions a request   ({requests} requests, "
          f"{concurrency} at a time)")
    for (name, label), per in results.items():
        print(f"{name:<10} {label:<13} {per / 1e6:>10.3f}")
    if bare:
        print("\nadded by the service (its count less the bare client's), M instructions")
        for (name, label), per in results.items():
            base = results.get((name, "bare client"))
            if label != "bare client" and base is not None:
                print(f"{name:<10} {label:<13} {(per - base) / 1e6:>10.3f}"
                      f"   ({per / base:.2f} x the bare client)")
    say(f"written to "
        f"{write_results(record(results, requests, warm, trees, concurrency), 'hotpath-ir-')}")


def record(results: dict[tuple[str, str], float], requests: int, warm: int,
           trees: dict[str, Path], concurrency: int = 1) -> dict:
    """The run as bench/results keeps it: M instructions a request by workload and tree, and
    what the service adds over the bare client (M, and as a multiple) where it was counted."""
    workloads: dict[str, dict] = {}
    for (name, label), per in results.items():
        workloads.setdefault(name, {})[label] = round(per / 1e6, 4)
    for counts in workloads.values():
        base = counts.get("bare client")
        if base:
            counts["added"] = {label: {"m_instructions": round(per - base, 4),
                                       "x_bare": round(per / base, 3)}
                               for label, per in list(counts.items()) if label != "bare client"}
    return {**provenance(), "settings": {"requests": requests, "warmup": warm,
                                         "concurrency": concurrency,
                                         "hash_seed": hash_seed()["PYTHONHASHSEED"],
                                         "trees": {k: str(v) for k, v in trees.items()}},
            "m_instructions_a_request": workloads}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--bare"]:
        on_service_loop(_bare_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                                    int(sys.argv[5]) if len(sys.argv) > 5 else 1))
    else:
        asyncio.run(main(sys.argv[1:] or ["get", "create"]))
