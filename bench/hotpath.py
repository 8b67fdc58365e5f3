"""The CPU the service adds per request over the bare driver, quickly, on any Neo4j:
`python -m bench.hotpath [workload ...]` (default: get create).

Against the Neo4j of VAULTGRAPH_NEO4J_URI / VAULTGRAPH_NEO4J_PASSWORD (the test one will do:
it adds a tenant named "bench" and HOTPATH_TOKENS tokens, nothing else), it starts
`vaultgraph serve` with one worker on HOTPATH_PORT, then for each workload, HOTPATH_ROUNDS
times: wrk drives the service for HOTPATH_SECONDS after a warm-up, and the service's process
tree's CPU ticks (/proc) are divided by the requests answered; the same items then run on the
bare driver in this process (bench/workloads.py: same statement, crypto and audit event) and
this process's CPU per request is read the same way. The per-round figures and their medians
are printed; "added" is service - bare. HOTPATH_BASELINE=<dir> (a tree of another commit,
e.g. `git archive <commit> | tar -x -C <dir>`) starts that tree's service too, on the next
port, and measures it in the same rounds, turn about: a before/after comparison on a busy
machine. HOTPATH_PROFILE=1 also py-spies the service for one
more window per workload and prints the self time by function (bench/profile.py).

Neo4j's CPU is not measured here (see `make bench` for that); the machine's other work skews
these figures far less than requests per second, and the medians of a few rounds less still.
HOTPATH_CPU=user or system counts that CPU time alone (default: both): whether what the
service adds is its own code's (user) or the kernel's work for its sockets (system).
Workloads as bench/hotpath_ir.py takes them: the proxy's destination is a process of this one's
(read apart from the bare client's CPU), `webhook_create` is refused, and so is a round in
which requests fail.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
import statistics
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from vaultgraph.catalog import Catalog
from vaultgraph.crypto import KeyRing
from vaultgraph.repository.database import Database
from vaultgraph.settings import PROJECT_ROOT

from . import cpu, environment, profile
from .config import BenchConfig
from .dataset import create_bench_tenant, load_tokens
from .environment import Service, new_kek, say
from .hotpath_ir import ProxyTarget, bare_context, close_context, refuse_failures, selected
from .loadgen import Wrk, ensure_wrk, run_bare
from .run import bare_op, http_pool, on_service_loop


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _keep(recording: Path, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    kept = where / recording.name
    if kept != recording:
        kept.write_bytes(recording.read_bytes())
    return kept


async def main(names: list[str]) -> None:
    seconds = float(_env("HOTPATH_SECONDS", "8"))
    warmup = float(_env("HOTPATH_WARMUP", "3"))
    rounds = int(_env("HOTPATH_ROUNDS", "3"))
    concurrency = int(_env("HOTPATH_CONCURRENCY", "8"))
    tokens = int(_env("HOTPATH_TOKENS", "1000"))
    port = int(_env("HOTPATH_PORT", "8391"))
    part = _env("HOTPATH_CPU", "all")
    chosen = selected(names)  # before any set-up: a name it refuses ends the run at once
    if part not in cpu.PARTS:
        raise SystemExit(f"HOTPATH_CPU must be one of {', '.join(cpu.PARTS)}")
    uri = os.environ["VAULTGRAPH_NEO4J_URI"]
    password = os.environ["VAULTGRAPH_NEO4J_PASSWORD"]
    work = Path(tempfile.mkdtemp(prefix="hotpath-"))
    cfg = BenchConfig(port=port, home=str(work), concurrency=concurrency)
    cfg_root = environment.ROOT
    work_dir = cfg.work_dir
    work_dir.mkdir(parents=True, exist_ok=True)
    wrk = ensure_wrk()
    if wrk is None:
        raise SystemExit("wrk is needed (apt-get install wrk)")
    catalog = Catalog.load(PROJECT_ROOT / "cypher")
    db = Database.connect(uri, "neo4j", password, catalog, "neo4j")
    # A version of its own: the service's start-up key check looks only at tenants made under
    # it, not at those other runs left in a shared database under other keys.
    kek = f"hot{secrets.token_hex(4)}:{new_kek().partition(':')[2]}"
    ring = KeyRing.from_spec(kek)
    tenant = await create_bench_tenant(db, ring)
    ids = await load_tokens(db, tenant, 0, tokens, 1000)
    proxy = await ProxyTarget.open(db, tenant.tenant_id, names)
    ctx, audit = bare_context(db, ring, tenant, ids, catalog, proxy)
    # The bare client is this process; the proxy's destination, its child, is neither side's.
    client = {"client": os.getpid()}
    if proxy.destination is not None:
        client["destination"] = proxy.destination.pid
    neo = SimpleNamespace(uri=uri, resolve_password=lambda: password)
    os.environ["VAULTGRAPH_WORKERS"] = "1"
    services = {"service": Service(cfg, neo, kek)}  # type: ignore[arg-type]
    baseline = os.environ.get("HOTPATH_BASELINE")
    if baseline:
        other = BenchConfig(port=port + 10, home=str(work / "baseline"), concurrency=concurrency)
        other.work_dir.mkdir(parents=True, exist_ok=True)
        services["baseline"] = Service(other, neo, kek)  # type: ignore[arg-type]
        # Its code and its statements (the catalog would be this checkout's otherwise).
        services["baseline"].env["PYTHONPATH"] = baseline
        services["baseline"].env["VAULTGRAPH_CYPHER_DIR"] = str(Path(baseline) / "cypher")
    for name, svc in services.items():
        # `python -m` puts its working directory first on the path: the baseline's own tree.
        environment.ROOT = Path(baseline) if name == "baseline" else cfg_root
        svc.start()
    environment.ROOT = cfg_root
    service = services["service"]
    loadgens = {name: Wrk(wrk, svc.url, tenant.app_key, concurrency, 1, work_dir)
                for name, svc in services.items()}
    loadgen = loadgens["service"]
    summary = {}
    try:
        for w in chosen:
            svc_ms, bare_ms, base_ms = [], [], []
            for r in range(rounds):
                rng = random.Random(f"{w.name}-{r}")  # noqa: S311 - request variety
                pool = http_pool(w, ctx, rng)
                # Turn about: which goes first alternates, so neither gains from going first.
                order = list(services.items())
                for name, svc in order[::-1] if r % 2 else order:
                    await loadgens[name].run(pool, warmup)
                    before = cpu.snapshot({"service": svc.pid}, part)
                    result = await loadgens[name].run(pool, seconds)
                    after = cpu.snapshot({"service": svc.pid}, part)
                    figure = cpu.per_request(before, after, result.requests)["service"]
                    (svc_ms if name == "service" else base_ms).append(figure)
                    say(f"{w.name} round {r + 1}: {name} {figure:.3f} ms/req "
                        f"({result.requests} req)")
                    refuse_failures(w.name, f"requests to the {name}", result.errors,
                                    result.requests + result.errors)
                svc = svc_ms[-1]
                op = bare_op(w, ctx)
                items = w.items(ctx, rng)
                await run_bare(op, items, concurrency, warmup)
                before = cpu.snapshot(client, part)
                bare = await run_bare(op, items, concurrency, seconds)
                after = cpu.snapshot(client, part)
                refuse_failures(w.name, "bare client operations", bare.errors,
                                bare.requests + bare.errors)
                own = cpu.per_request(before, after, bare.requests)["client"]
                bare_ms.append(own)
                say(f"{w.name} round {r + 1}: bare {own:.3f} ms/req ({bare.requests} req), "
                    f"added {svc - own:.3f}")
            s, b = statistics.median(svc_ms), statistics.median(bare_ms)
            summary[w.name] = (s, b, s - b)
            if base_ms:
                summary[w.name + " (baseline)"] = (statistics.median(base_ms), b,
                                                   statistics.median(base_ms) - b)
            if os.environ.get("HOTPATH_PROFILE"):
                out = work_dir / f"{w.name}.collapsed.txt"
                pool = http_pool(w, ctx, random.Random(w.name))  # noqa: S311
                recording, _ = await asyncio.gather(
                    profile.record(service.pid, seconds, out), loadgen.run(pool, seconds))
                if recording is not None:
                    kept = _keep(out, Path(_env("HOTPATH_PROFILE_DIR", str(work_dir))))
                    shares = profile.summarize(out, top=40)
                    print(f"\n== {w.name}: self time by function ({shares['samples']} samples, "
                          f"{kept}) ==")
                    for name, pct in shares["self_by_category_pct"]:
                        print(f"  [{name}] {pct}%")
                    for name, pct in shares["self_pct"]:
                        print(f"  {pct:5.1f}%  {name}")
    finally:
        for svc in services.values():
            svc.stop()
        await close_context(ctx)
        proxy.close()
        await audit.stop()
        await db.close()
    print("\nworkload      service ms/req   bare ms/req   added ms/req   (medians of "
          f"{rounds} rounds of {seconds:g}s, {concurrency} connections"
          + ("" if part == "all" else f"; {part} CPU time only") + ")")
    for name, (s, b, a) in summary.items():
        print(f"{name:<24} {s:>14.3f} {b:>13.3f} {a:>14.3f}")


if __name__ == "__main__":
    on_service_loop(main(sys.argv[1:] or ["get", "create"]))
