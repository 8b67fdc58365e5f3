"""Where the CPU the service adds goes, by function: `python -m bench.added_profile
[workload ...]` (default: get create).

The same set-up as bench/hotpath_ir.py (one service worker, requests one at a time on one
keep-alive connection; the bare client in a process of its own running the same operations),
but under cProfile with the thread's CPU clock as its timer instead of callgrind: each side's
profile over ADDED_PROFILE_REQUESTS requests after ADDED_PROFILE_WARMUP, and their difference
function by function and by package — what the service runs that the bare client does not
(aiohttp's server, the middlewares, validation, presentation, logging, metrics) and what
the bare client runs that the service does not (negative). cProfile's own cost per call
inflates every figure (a profiled request costs several times an unprofiled one), more where
calls are many and short, so read the shares, not the milliseconds; bench/hotpath_ir.py gives
the magnitudes. The profiles are kept (printed) for `python -m pstats`.
ADDED_PROFILE_CONCURRENCY=<n> (default 1) keeps n requests in flight on both sides, as
HOTPATH_IR_CONCURRENCY does. Workloads as bench/hotpath_ir.py takes them (the proxy's
destination made here; `webhook_create` refused); a run in which any request or operation
fails is refused.
"""

from __future__ import annotations

import asyncio
import collections
import cProfile
import pstats
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

from vaultgraph.server import tune_gc
from vaultgraph.settings import PROJECT_ROOT

from .environment import say
from .hotpath_ir import (
    ProxyTarget,
    Worker,
    _drive,
    _env,
    bare_context,
    bench_tenant,
    close_context,
    refuse_failures,
    run_ops,
    selected,
    served,
)
from .run import bare_op, bare_settings, http_pool, on_service_loop, provenance, write_results
from .workloads import WORKLOADS, Context

# Where a function's file lies decides its package; the first match wins.
PACKAGES = (
    ("neo4j driver", ("neo4j/",)), ("aiohttp", ("aiohttp/", "multidict/", "yarl/")),
    ("marshmallow", ("marshmallow/",)), ("liquid", ("liquid/",)), ("asyncio", ("asyncio/",)),
    ("logging", ("logging/",)), ("prometheus", ("prometheus_client/",)),
    ("vaultgraph", ("vaultgraph/",)), ("builtins", ("~",)),
)

# The service's side: cProfile switched on by SIGUSR1, written to ADDED_PROFILE_OUT on SIGUSR2.
_SERVICE = """
import cProfile, os, runpy, signal, sys, time
p = cProfile.Profile(time.thread_time)
signal.signal(signal.SIGUSR1, lambda *_: p.enable())
def _dump(*_):
    p.disable()
    p.dump_stats(os.environ["ADDED_PROFILE_OUT"])
signal.signal(signal.SIGUSR2, _dump)
sys.argv = ["vaultgraph.server"]
runpy.run_module("vaultgraph.server", run_name="__main__")
"""


def package(path: str) -> str:
    for name, markers in PACKAGES:
        if any(m in path for m in markers):
            return name
    return "other (stdlib)"


def _short(path: str) -> str:
    for marker in ("site-packages/", str(PROJECT_ROOT) + "/", "python3.11/"):
        path = path.split(marker, 1)[-1]
    return path


def per_function(path: Path, n: int) -> dict[tuple[str, int, str], tuple[float, float]]:
    """(file, line, function) → (calls, profiled CPU ms) per request."""
    out: dict = collections.defaultdict(lambda: [0.0, 0.0])
    for (f, line, fn), (_, calls, own, _, _) in pstats.Stats(str(path)).stats.items():
        row = out[(_short(f), line, fn)]
        row[0] += calls / n
        row[1] += own * 1000 / n
    return {k: (c, ms) for k, (c, ms) in out.items()}


def difference(service: dict, bare: dict, top: int = 30) -> dict:
    """The service's profile less the bare client's, by package and by function."""
    keys = set(service) | set(bare)
    diff = {k: (service.get(k, (0, 0))[0] - bare.get(k, (0, 0))[0],
                service.get(k, (0, 0))[1] - bare.get(k, (0, 0))[1]) for k in keys}
    added = sum(ms for _, ms in diff.values())
    by_package: collections.Counter[str] = collections.Counter()
    for (f, _, _), (_, ms) in diff.items():
        by_package[package(f)] += ms
    functions = sorted(diff.items(), key=lambda kv: -kv[1][1])[:top]
    return {"service_ms": sum(ms for _, ms in service.values()),
            "bare_ms": sum(ms for _, ms in bare.values()), "added_ms": added,
            "by_package": by_package.most_common(),
            "functions": [(f"{fn} ({f}:{line})", calls, ms)
                          for (f, line, fn), (calls, ms) in functions]}


def _service_profile(port: int, kek: str, out: Path, key: str, pool, warm: int,
                     requests: int, concurrency: int = 1) -> int:
    """The service's profile of `requests` requests after `warm`, written to `out`; the
    requests that failed."""
    worker = Worker(PROJECT_ROOT, port, kek, out)
    env = {**worker.env, "ADDED_PROFILE_OUT": str(out)}
    log = out.with_suffix(".log")
    with served([sys.executable, "-c", _SERVICE], env, log, port,
                "the profiled service") as proc:
        errors = _drive(port, key, pool, warm, concurrency)
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        errors += _drive(port, key, pool[warm:], requests, concurrency)
        proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 120
        while not out.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the profiled service wrote no profile; see {log}")
            time.sleep(0.2)
        time.sleep(1)  # the dump is written whole before the file is read
        return errors


async def _bare_profile(ctx: Context, name: str, out: Path, warm: int, requests: int,
                        concurrency: int = 1) -> int:
    """The bare client's profile, as `_service_profile`'s; the operations that failed."""
    w = next(w for w in WORKLOADS if w.name == name)
    op = bare_op(w, ctx)
    items = w.items(ctx, random.Random(w.name))  # noqa: S311 - request variety
    errors = await run_ops(op, items, 0, warm, concurrency, ctx.audit)
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    errors += await run_ops(op, items, warm, requests, concurrency, ctx.audit)
    profile.disable()
    profile.dump_stats(str(out))
    return errors


async def main(names: list[str]) -> None:
    requests = int(_env("ADDED_PROFILE_REQUESTS", "1000"))
    warm = int(_env("ADDED_PROFILE_WARMUP", "300"))
    concurrency = int(_env("ADDED_PROFILE_CONCURRENCY", "1"))
    port = int(_env("HOTPATH_PORT", "8391"))
    workloads = selected(names)  # before any set-up: a name it refuses ends the run at once
    work = Path(tempfile.mkdtemp(prefix="added-profile-"))
    db, catalog, kek, ring, tenant, ids = await bench_tenant()
    proxy = await ProxyTarget.open(db, tenant.tenant_id, names)
    ctx, audit = bare_context(db, ring, tenant, ids, catalog, proxy)
    tune_gc(bare_settings())  # as make bench's bare client collects its garbage
    kept: dict[str, dict] = {}
    try:
        for w in workloads:
            pool = http_pool(w, ctx, random.Random(w.name))  # noqa: S311 - request variety
            svc, bare = work / f"{w.name}-service.pstats", work / f"{w.name}-bare.pstats"
            errors = await asyncio.to_thread(_service_profile, port, kek, svc, tenant.app_key,
                                             pool, warm, requests, concurrency)
            refuse_failures(w.name, "requests to the service", errors, warm + requests)
            errors = await _bare_profile(ctx, w.name, bare, warm, requests, concurrency)
            refuse_failures(w.name, "bare client operations", errors, warm + requests)
            d = kept[w.name] = difference(per_function(svc, requests),
                                          per_function(bare, requests))
            print(f"\n== {w.name}: profiled CPU a request, service {d['service_ms']:.3f} ms, "
                  f"bare client {d['bare_ms']:.3f} ms, added {d['added_ms']:.3f} ms "
                  f"({svc}, {bare})")
            # Shares of what the service runs more of (the packages it adds to): what the bare
            # client runs more of is listed, negative, apart.
            more = sum(ms for _, ms in d["by_package"] if ms > 0)
            for name, ms in d["by_package"]:
                share = f"{100 * ms / more:5.1f} %" if ms > 0 else "       "
                print(f"  {ms:8.3f} ms {share}  {name}")
            print("  function (service less bare client):       calls    ms")
            for name, calls, ms in d["functions"]:
                print(f"  {name[:60]:<60} {calls:6.1f} {ms:7.3f}")
    finally:
        await close_context(ctx)
        proxy.close()
        await audit.stop()
        await db.close()
    say(f"profiles in {work}")
    record = {**provenance(), "settings": {"requests": requests, "warmup": warm,
                                           "concurrency": concurrency},
              "ms_a_request": kept}
    say(f"written to {write_results(record, 'added-profile-')}")


if __name__ == "__main__":
    on_service_loop(main(sys.argv[1:] or ["get", "create"]))
