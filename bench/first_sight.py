"""First sight of a search shape (`python -m bench --first-sight`, `make bench-first-sight`).

A search used to be planned by Neo4j once per shape of query: the first query of a new shape
paid seconds of planning (ten `(ancestor:X AND NOT descendant:X)` clauses ORed: 5.5 s; twenty
`ancestor:X` terms: 3.1 s), every later one of that shape milliseconds. Every query now runs
one statement, planned once. After max(BENCH_WARMUP, BENCH_JVM_WARMUP) seconds of the worst
shapes (a fresh Neo4j's JIT compiles what they run), this measures through the service, on the
benchmark's data set:
- `cold`: each worst shape as the very first search after Neo4j's query caches are cleared
  (as after a restart): the one statement's planning, paid once by whichever search comes
  first;
- `first`: each worst shape's first sight once any other search has run (it should cost what
  a warm one does);
- `warm`: the same shape again with other values, REPEATS times (p50 and max).

`python -m bench.first_sight --after-start [ROUNDS]`: the first creates after a (re)start of
Neo4j and the service (below, `after_start`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import aiohttp
import orjson

from vaultgraph.search.query import Limits, leaves, parse

from .dataset import PER_CUSTOMER, customer

REPEATS = 20


def _ten_and_not(roots: list[str]) -> str:
    return " OR ".join(f"(ancestor:{x} AND NOT descendant:{x})" for x in roots[:10])


def _twenty_ancestors(roots: list[str]) -> str:
    return " OR ".join(f"ancestor:{x}" for x in roots[:20])


WORST: dict[str, Callable[[list[str]], str]] = {
    "ten (ancestor AND NOT descendant) ORed": _ten_and_not,
    "twenty ancestor ORed": _twenty_ancestors,
}


class _Roots:
    """Customers' first tokens (each the parent of its customer's others), handed out in
    turn, so each query names anchors no earlier query of the run named while any remain."""

    def __init__(self, ids: list[str]):
        self.roots = ids[::PER_CUSTOMER] or ids
        self.next = 0

    def take(self, n: int = 20) -> list[str]:
        out = [self.roots[(self.next + i) % len(self.roots)] for i in range(n)]
        self.next += n
        return out


async def measure(url: str, key: str, ids: list[str], clear_caches,
                  warmup: float = 0.0) -> dict:
    """The figures above; `clear_caches` empties Neo4j's query caches. First, `warmup`
    seconds of the worst shapes, so a fresh Neo4j's JVM has compiled the code they run (the
    figures are for planning, not for a cold JIT)."""
    roots = _Roots(ids)
    headers = {"SVC-API-KEY": key, "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as http:
        async def timed(query: str) -> tuple[float, int]:
            """Milliseconds to the whole answer, and its status (a cold search may outlast
            the request's database budget: a 503, recorded as such)."""
            began = time.perf_counter()
            async with http.post(url + "/tokens/search", headers=headers,
                                 data=orjson.dumps({"query": query, "size": 50})) as resp:
                await resp.read()
                status = resp.status
            if status not in (200, 503):
                raise RuntimeError(f"search answered {status}")
            return round((time.perf_counter() - began) * 1000, 1), status

        until = time.monotonic() + warmup
        while time.monotonic() < until:
            for make in WORST.values():
                await timed(make(roots.take()))

        shapes: dict[str, dict] = {}
        for name, make in WORST.items():
            await clear_caches()
            cold, cold_status = await timed(make(roots.take()))
            await clear_caches()
            # Any other search first, until one is answered (a search that outlasts its
            # database budget may leave the statement unplanned).
            for _ in range(10):
                if (await timed(f"metadata.customer_id:{customer(0)}"))[1] == 200:
                    break
            first, first_status = await timed(make(roots.take()))
            warm = [await timed(make(roots.take())) for _ in range(REPEATS)]
            terms = sum(1 for _ in leaves(parse(make(roots.take()), Limits())))
            shapes[name] = {"terms": terms, "cold_ms": cold, "cold_status": cold_status,
                            "first_ms": first, "first_status": first_status,
                            "warm_p50_ms": statistics.median(ms for ms, _ in warm),
                            "warm_max_ms": max(ms for ms, _ in warm),
                            "warm_errors": sum(status != 200 for _, status in warm)}
    return {"repeats": REPEATS, "warmup_s": warmup, "shapes": shapes}


def table(result: dict) -> str:
    from .report import machine_line

    fs = result["first_sight"]
    lines = [f"stored tokens: {result['stored_tokens']:,}; {fs['warmup_s']:g}s of the shapes "
             f"first, then per shape: {fs['repeats']} warm repeats", machine_line(result), "",
             "| shape | terms | cold ms (caches cleared) | first sight ms | warm p50 ms "
             "| warm max ms | warm errors |", "|---|--:|--:|--:|--:|--:|--:|"]

    def status(code: int) -> str:
        return "" if code == 200 else f" ({code})"

    for name, s in result["first_sight"]["shapes"].items():
        lines.append(f"| {name} | {s['terms']} | {s['cold_ms']:.1f}{status(s['cold_status'])} "
                     f"| {s['first_ms']:.1f}{status(s['first_status'])} "
                     f"| {s['warm_p50_ms']:.1f} | {s['warm_max_ms']:.1f} "
                     f"| {s['warm_errors']} |")
    return "\n".join(lines)


# --- the first creates after a start ----------------------------------------------------------
#
# `python -m bench.first_sight --after-start [ROUNDS]`: a Neo4j of its own (a new home under
# the system's temporary folder, Bolt/HTTP on BENCH_AFTER_START_PORTS, default 7791 and 7792,
# the service and its metrics on the next two ports), started with `vaultgraph serve
# --local-neo4j`, ROUNDS times (default 3): the first round on a new database (the bootstrap
# creates its tenant), each later one a restart of both over the same data (a cold Neo4j JVM,
# as after a deploy or a reboot). Each round waits for `/ready`, then times the first POST
# /tokens (and its audit event's group commit, from the service's metrics) and the ten after
# it, and reads the service's `ready` log line (start-up and warm-up time).
# BENCH_SERVE_PYTHONPATH: the service's code from another tree (e.g. an earlier commit's, for
# a before/after).

CREATES_AFTER_FIRST = 10


def _after_start_round(home, ports: tuple[int, int, int], log_path) -> dict:
    import os
    import signal
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    bolt, http_port, port = ports
    env = {**os.environ, "VAULTGRAPH_HOME": str(home), "VAULTGRAPH_NEO4J_BOLT_PORT": str(bolt),
           "VAULTGRAPH_NEO4J_HTTP_PORT": str(http_port), "VAULTGRAPH_PORT": str(port),
           "VAULTGRAPH_WORKERS": "1", "VAULTGRAPH_LOG_FORMAT": "json",
           "VAULTGRAPH_METRICS_PORT": str(port + 1)}
    for name in ("VAULTGRAPH_NEO4J_URI", "VAULTGRAPH_NEO4J_PASSWORD"):
        env.pop(name, None)
    url = f"http://127.0.0.1:{port}"
    if os.environ.get("BENCH_SERVE_PYTHONPATH"):  # another tree's service (a before/after)
        env["PYTHONPATH"] = os.environ["BENCH_SERVE_PYTHONPATH"]
        # Its statements too: the packaged catalog is found through this checkout's install.
        env["VAULTGRAPH_CYPHER_DIR"] = os.path.join(os.environ["BENCH_SERVE_PYTHONPATH"],
                                                    "cypher")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vaultgraph", "serve", "--local-neo4j"], env=env,
            cwd=home, stdout=log, stderr=subprocess.STDOUT)
    try:
        began = time.monotonic()
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited ({proc.returncode}); see {log_path}")
            try:
                with urllib.request.urlopen(url + "/ready", timeout=5) as resp:  # noqa: S310
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() - began > 300:
                raise RuntimeError(f"not ready in 300 s; see {log_path}")
            time.sleep(0.1)
        ready_s = round(time.monotonic() - began, 1)
        key = (home / "admin.key").read_text().strip()
        times, statuses, audit_commits = [], [], []
        for i in range(1 + CREATES_AFTER_FIRST):
            request = urllib.request.Request(  # noqa: S310
                url + "/tokens", method="POST",
                data=orjson.dumps({"type": "token", "data": {"n": i}}),
                headers={"SVC-API-KEY": key, "Content-Type": "application/json"})
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=60) as resp:  # noqa: S310
                    resp.read()
                    status = resp.status
            except urllib.error.HTTPError as exc:  # a 503: past the request's budget
                status = exc.code
            times.append(round((time.perf_counter() - t0) * 1000, 1))
            statuses.append(status)
            if i == 0:  # the first create's share that was its audit event's group commit
                audit_commits.append(_audit_commit_ms(f"http://127.0.0.1:{port + 1}"))
    finally:
        proc.send_signal(signal.SIGINT)  # drains, stops the Neo4j it started
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    ready_line = {}
    for line in open(log_path, "rb"):
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(entry, dict) and entry.get("msg") == "request" and entry.get(
                "method") == "POST" and "first_create_at" not in ready_line:
            ready_line["first_create_at"] = entry.get("ts")
        if isinstance(entry, dict) and entry.get("message", entry.get("msg")) == "ready":
            ready_line.update({k: v for k, v in entry.items() if k.endswith("ms") or k in (
                "statements_prepared", "writes_rehearsed", "ts")})
    later = times[1:]
    return {"until_ready_s": ready_s, "ready_log": ready_line, "first_ms": times[0],
            "first_status": statuses[0], "first_audit_commit_ms": audit_commits[0],
            "next_p50_ms": statistics.median(later),
            "next_max_ms": max(later), "next_ms": later,
            "next_not_201": sum(status != 201 for status in statuses[1:])}


def _audit_commit_ms(url: str) -> float | None:
    """Milliseconds of audit group commits so far (the service's /metrics)."""
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:  # noqa: S310
        for line in resp.read().decode().splitlines():
            if line.startswith("vaultgraph_audit_commit_seconds_sum"):
                return round(float(line.split()[-1]) * 1000, 1)
    return None


def after_start(rounds: int = 3) -> dict:
    import os
    import shutil
    import tempfile
    from pathlib import Path

    base = int(os.environ.get("BENCH_AFTER_START_PORTS", "7791"))
    ports = (base, base + 1, base + 2)
    lib = Path(os.environ.get("BENCH_NEO4J_LIB", Path(".vaultgraph/neo4j-lib").resolve()))
    out = []
    tmp = Path(tempfile.mkdtemp(prefix="vaultgraph-after-start-"))
    home = tmp / "home"
    home.mkdir()
    (home / "neo4j-lib").symlink_to(lib)
    for n in range(rounds):
        result = _after_start_round(home, ports, tmp / f"serve-{n}.log")
        result["round"] = "new database" if n == 0 else f"restart {n}"
        print(orjson.dumps(result).decode(), flush=True)
        out.append(result)
    shutil.rmtree(tmp)  # kept, with the service's logs, when a round failed
    return {"rounds": out}


if __name__ == "__main__":
    import sys

    if "--after-start" not in sys.argv:
        sys.exit("usage: python -m bench.first_sight --after-start [ROUNDS]")
    args = [a for a in sys.argv[1:] if a != "--after-start"]
    after_start(int(args[0]) if args else 3)
