"""The benchmark run: start Neo4j and the service, load the data set, run each workload against
the service and against the bare driver, print the table and write bench/results/."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from vaultgraph.catalog import Catalog
from vaultgraph.crypto import KeyRing
from vaultgraph.neo4j_local import LocalNeo4j
from vaultgraph.repository.audit import AuditRepository
from vaultgraph.repository.database import Database, kept_sessions, retire_sessions
from vaultgraph.repository.tokens import TokenFilter
from vaultgraph.repository.webhooks import WebhookRepository
from vaultgraph.server import run_loop, settle_heap, tune_gc
from vaultgraph.services.audit_writer import AuditWriter
from vaultgraph.services.tokens import meta_kvs
from vaultgraph.settings import PROJECT_ROOT, Settings
from vaultgraph.stall_monitor import StallMonitor

from . import cpu, first_sight, jfr, memory, outbox, plans, profile, report, stalls
from .config import RESULTS, ROOT, BenchConfig
from .dataset import PER_CUSTOMER, Tenant, create_bench_tenant, customer, load_tokens
from .destination import Destination, create_bench_proxy
from .environment import Service, machine, new_kek, say, service_workers, start_neo4j
from .loadgen import PythonClient, Wrk, ensure_wrk, run_bare
from .neo4j_log import DebugLog, PauseLog
from .receiver import ReceiverProcess
from .stats import (
    AUDIT_TARGETS,
    Result,
    above_floor,
    added_cpu,
    audit_rounds,
    combined,
    neo4j_added_outside_checkpoints,
    one_rate,
    ratio,
    settled,
)
from .workloads import FLOOR, WORKLOADS, Context, Request, Workload, audited

JVM_ROUND = 3.0     # seconds per workload and side in a JVM warm-up round
JIT_SETTLED = 0.05  # of one core: the JIT compiler has compiled what the workloads run


def http_pool(w: Workload, ctx: Context, rng: random.Random) -> list[Request]:
    """The service side's requests of `w`: one per item, cycled through by the load generator."""
    return [w.http(i) for i in w.items(ctx, rng)]


def bare_op(w: Workload, ctx: Context):
    """One bare request of `w`: the workload's driver work inside its share of the audit
    trail."""
    async def op(item) -> bool:  # whether its event waits to be linked (`audited`)
        return await audited(ctx, w.http(item), w.bare(ctx, item))
    return op


async def then(run: Awaitable[Result], tail: Callable[[], Awaitable[None]] | None) -> Result:
    """`run`'s result, once `tail` (if any) has run after it."""
    result = await run
    if tail is not None:
        await tail()
    return result


async def rounds_until(limit: float, one_round: Callable[[int], Awaitable[float | None]],
                       done: Callable[[list[float | None]], bool],
                       told: Callable[[int, float | None], str]) -> tuple[list, float, bool]:
    """`one_round(n)` run again, each giving a figure (and `told(n, figure)` said with the
    seconds so far), until `done(figures)` holds or `limit` seconds have passed: the figures,
    the seconds taken, and whether they settled."""
    began, figures = time.monotonic(), []
    while time.monotonic() - began < limit:
        figures.append(await one_round(len(figures)))
        say(f"{told(len(figures), figures[-1])} ({time.monotonic() - began:.0f}s so far)")
        if done(figures):
            return figures, time.monotonic() - began, True
    return figures, time.monotonic() - began, False


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=PROJECT_ROOT,  # noqa: S603, S607 - read-only
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def git_sha() -> str:
    return _git("rev-parse", "--short", "HEAD") or "nogit"


def git_dirty() -> bool | None:
    """True when the measured tree differs from the commit named by git_sha."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def probe(url: str, key: str, r: Request) -> tuple[int, dict | None]:
    req = urllib.request.Request(url + r.path, data=r.body or None, method=r.method,  # noqa: S310
                                 headers={"SVC-API-KEY": key,
                                          **({"Content-Type": r.content_type}
                                             if r.content_type else {})})
    try:
        # A cold service on a loaded machine can take seconds over its first request.
        with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - local http only
            body = json.loads(resp.read() or b"null")
            return resp.status, body if isinstance(body, dict) else None
    except urllib.error.HTTPError as exc:
        return exc.code, None


class Bench:
    def __init__(self, cfg: BenchConfig, neo: LocalNeo4j):
        self.cfg = cfg
        self.neo = neo
        self.service: Service | None = None
        self.db: Database | None = None
        self.kek = new_kek()
        self.tenant: Tenant | None = None
        self.ids: list[str] = []
        self.loadgen = None
        self.warmed = False
        self.audit: AuditWriter | None = None
        self.idle = kept_sessions()  # the bare side's, shared by every `context`
        self.jfr: jfr.Recording | None = None  # BENCH_JFR: one recording for the whole run
        self.windows: dict[str, dict[str, list[jfr.Window]]] = {}  # workload → side → windows
        self.jfr_files = 0  # the run's JFR windows so far: each copied to a file of its own
        self.debug_log = DebugLog(neo.home / "logs" / "debug.log")
        self.pause_log = PauseLog(neo.pause_log)
        # The bare side's process times its own loop and collections, as the service does.
        self.stall_monitor = StallMonitor()
        self.destination = Destination()      # the proxy workload's (a process of its own)
        self.proxy_id = ""
        self.receiver = ReceiverProcess()     # the webhook_create workload's endpoint
        self.outbox_profile: dict | None = None
        self.session: aiohttp.ClientSession | None = None

    # -- set-up ---------------------------------------------------------------------------

    async def setup(self, *, outbox_phase: bool = False) -> None:
        """`outbox_phase`: the run may measure an outbox workload (`make bench`'s; the
        receiver is started only then, and only if one is selected and can be measured)."""
        cfg = self.cfg
        cfg.work_dir.mkdir(parents=True, exist_ok=True)
        wrk = ensure_wrk() if cfg.loadgen == "wrk" else None
        neo = self.neo
        catalog = Catalog.load(PROJECT_ROOT / "cypher")
        self.db = Database.connect(self.neo.uri, "neo4j", self.neo.resolve_password(), catalog,
                                   "neo4j")
        await self.db.apply_schema()
        ring = KeyRing.from_spec(self.kek)
        self.tenant = await create_bench_tenant(self.db, ring)
        defaults = bare_settings()
        self.audit = AuditWriter.from_settings(AuditRepository(self.db), ring, defaults)
        if cfg.selected("proxy"):
            self.destination.start()
            self.proxy_id = await create_bench_proxy(self.db, self.tenant.tenant_id,
                                                     self.destination.url)
        if outbox_phase and outbox_refused() is None and any(
                w.outbox and cfg.selected(w.name) for w in WORKLOADS):
            self.receiver.start()
        if cfg.selected("proxy") or self.receiver.proc is not None:
            self.session = aiohttp.ClientSession()
        self.service = Service(cfg, neo, self.kek)
        self.service.start()
        self.stall_monitor.start()
        if wrk:
            self.loadgen = Wrk(wrk, self.service.url, self.tenant.app_key, cfg.concurrency,
                               cfg.wrk_threads, cfg.work_dir)
        else:
            if cfg.loadgen == "wrk":
                say("wrk is not available: falling back to the aiohttp client (costs more CPU)")
            self.loadgen = PythonClient(self.service.url, self.tenant.app_key, cfg.concurrency)

    async def load_to(self, n: int) -> None:
        if n <= len(self.ids):
            return
        began = time.monotonic()
        self.ids += await load_tokens(self.db, self.tenant, len(self.ids), n, self.cfg.load_batch)
        await self.db.driver.execute_query("CALL db.awaitIndexes(300)", database_="neo4j")
        say(f"{len(self.ids):,} tokens stored ({time.monotonic() - began:.0f}s)")
        await self.check_dataset()
        settle_heap()  # the bare client's process keeps its heap as a serving process does

    async def check_dataset(self) -> None:
        """The loaded rows must be what the service's own statements find (the loader writes the
        graph shape directly, so a change to cypher/tokens/ can leave it behind)."""
        ctx = self.context()
        tenant_id = self.tenant.tenant_id
        node = await ctx.tokens.get(tenant_id=tenant_id, id=self.ids[-1], prefixes=["/"])
        page = await ctx.tokens.page(
            tenant_id=tenant_id, prefixes=["/"], after="", limit=51,
            where=TokenFilter(meta_kvs=tuple(meta_kvs({"customer_id": customer(0)}))))
        want = min(PER_CUSTOMER, len(self.ids))
        if node is None or len(page) < want:
            raise RuntimeError(
                f"the loaded data set does not match the service's statements (get found "
                f"{node is not None}, a metadata page held {len(page)} of {want}): update "
                "bench/cypher/load_tokens.cypher to the shape cypher/tokens/create.cypher writes")

    async def memory(self) -> dict:
        """The service's resident set (its workers summed), Neo4j's heap and resident set (heap,
        page cache and native memory), now. (The store's size on disk is read once Neo4j has
        stopped: until a checkpoint, its files lag behind what the page cache holds.)"""
        return {"service_rss_mib": memory.mib(memory.tree_rss_bytes(self.service.pid)),
                "neo4j_rss_mib": memory.mib(memory.tree_rss_bytes(self.neo.running_pid())),
                "neo4j_heap_mib": await memory.neo4j_heap(self.db.driver, self.db.database),
                "neo4j_pagecache": self.cfg.neo4j_pagecache}

    async def teardown(self) -> None:
        """Stop what the run started; the processes (the service, the receiver) even when an
        earlier step fails, so none outlives the run."""
        try:
            await self.stall_monitor.stop()
            if self.session is not None:
                await self.session.close()
            self.destination.stop()
            if self.audit is not None:
                await self.audit.stop()
            await retire_sessions(self.idle)
            if self.db is not None:
                await self.db.close()
        finally:
            self.receiver.stop()
            if self.service is not None:
                self.service.stop()

    def context(self) -> Context:
        """The bare side's context; every one shares the run's kept sessions (`self.idle`,
        closed at the teardown)."""
        settings = bare_settings()
        return Context(self.tenant, self.ids, self.db.catalog, self.db.driver,
                       audit=self.audit, proxy_id=self.proxy_id,
                       destination=self.destination.url, session=self.session, idle=self.idle,
                       create_lanes=settings.create_lanes,
                       create_batch_max=settings.create_batch_max,
                       get_lanes=settings.get_lanes, get_batch_max=settings.get_batch_max,
                       request_timeout=settings.request_timeout)

    # -- one workload ---------------------------------------------------------------------

    def warmup(self) -> float:
        """The first warm-up after the load is longer: Neo4j's and Python's caches start cold."""
        if self.cfg.warmup <= 0:
            return 0
        first, self.warmed = not self.warmed, True
        return max(self.cfg.warmup, 15.0) if first else self.cfg.warmup

    async def warm_jvm(self, workloads: list[Workload]) -> dict:
        """Run the selected workloads on both sides, round after round, until Neo4j's JIT
        compiler threads use under JIT_SETTLED of a core over a round (or BENCH_JVM_WARMUP
        seconds pass). A JVM compiles its hot paths for minutes after start: measured at once,
        the first workload's side ran on a Neo4j still interpreting and spending up to a core
        on compilation (4 ms of JIT CPU per get), which the later side did not. Outbox
        workloads are left to their phase's own warm-up (`warm_outbox`): a webhook delivered
        here would have the service's sender wake for the bench tenant on every later write
        (an empty claim each time) while the bare side's never does."""
        workloads = [w for w in workloads if not w.outbox]
        ctx = self.context()

        async def one_round(n: int) -> None:
            for w in workloads:
                rng = random.Random(f"jvm-{w.name}-{n}")  # noqa: S311 - request variety
                await self.loadgen.run(http_pool(w, ctx, rng), JVM_ROUND)
                await run_bare(bare_op(w, ctx), w.items(ctx, rng), self.cfg.concurrency,
                               JVM_ROUND)

        return await self.jit_settled(one_round if workloads else None, "JVM warm-up")

    async def warm_outbox(self, w: Workload) -> dict:
        """An outbox workload's own JVM warm-up, at the start of its phase, as `warm_jvm`'s:
        rounds of both sides with a webhook subscribed, the service's sender delivering its
        side's events and a bare delivery loop the bare side's (either may take the other's:
        nothing is measured here), so Neo4j has compiled the claims and outcomes; the webhook
        is disabled after them, its undelivered rest paused, never sent."""
        ctx = self.context()
        repo = WebhookRepository(self.db)
        webhook_id, _ = await outbox.subscribe(repo, self.tenant.tenant_id, self.tenant.keys,
                                               f"{self.receiver.url}/hook/jvm", "jvm")

        async def one_round(n: int) -> None:
            rng = random.Random(f"jvm-{w.name}-{n}")  # noqa: S311 - request variety
            await self.loadgen.run(http_pool(w, ctx, rng), JVM_ROUND)
            deliveries = outbox.BareDeliveries(ctx.webhooks, self.tenant.keys, self.session,
                                               bare_settings())
            ctx.outbox = deliveries.start()
            try:
                await run_bare(bare_op(w, ctx), w.items(ctx, rng), self.cfg.concurrency,
                               JVM_ROUND)
            finally:
                await deliveries.stop()
                ctx.outbox = None

        try:
            return await self.jit_settled(one_round, f"{w.name}'s JVM warm-up")
        finally:
            await outbox.unsubscribe(repo, self.tenant.tenant_id, webhook_id)

    async def jit_settled(self, one_round: Callable[[int], Awaitable[None]] | None,
                          what: str) -> dict:
        """`one_round` run again until Neo4j's JIT compiler threads use under JIT_SETTLED of a
        core over a round, or BENCH_JVM_WARMUP seconds pass."""
        limit = self.cfg.jvm_warmup
        if limit <= 0 or one_round is None:
            return {"seconds": 0, "rounds": 0, "jit_cores_last_round": None}

        async def jit_share(n: int) -> float:
            t0, threads0 = time.monotonic(), cpu.threads(self.neo.running_pid())
            await one_round(n)
            jit = cpu.threads(self.neo.running_pid()).since(threads0)["jit"]
            return jit * cpu.TICK_MS / 1000 / (time.monotonic() - t0)

        shares, seconds, done = await rounds_until(
            limit, jit_share, lambda shares: shares[-1] < JIT_SETTLED,
            lambda n, share: f"{what} round {n}: Neo4j's JIT used {share:.2f} of a core")
        if not done:
            say(f"{what} stopped at BENCH_JVM_WARMUP={limit:g}s with the JIT "
                "still compiling: the next workloads may measure a colder Neo4j")
        self.warmed = True
        return {"seconds": round(seconds), "rounds": len(shares),
                "jit_cores_last_round": round(shares[-1], 3) if shares else None}

    async def settle_workload(self, w: Workload, ctx: Context) -> dict:
        """Both sides in turn, unmeasured, a slice of BENCH_WARMUP seconds each (at least 3),
        until Neo4j's CPU a request over a pair of slices is within SETTLE_TOLERANCE of the
        pair before, or BENCH_WORKLOAD_SETTLE seconds pass. A workload begins on a page cache
        that the one before filled with its own pages (a store of 5 GB, a cache of 1): in the
        first 20-40 s of tokenize after the searches, Neo4j's statement threads spent up to
        three times the CPU a request they spent later, its JIT and background threads no
        more, and the round's first side paid for it, which was the service's."""
        limit = self.cfg.workload_settle
        if limit <= 0:
            return {"seconds": 0, "pairs": 0, "neo4j_ms": []}
        slice_s, op = max(self.cfg.warmup, 3.0), bare_op(w, ctx)

        async def neo4j_ms(n: int) -> float | None:
            rng = random.Random(f"settle-{w.name}-{n}")  # noqa: S311 - request variety
            before = cpu.snapshot({"neo4j": self.neo.running_pid()})
            served = await self.loadgen.run(http_pool(w, ctx, rng), slice_s)
            answered = await run_bare(op, w.items(ctx, rng), self.cfg.concurrency, slice_s)
            after = cpu.snapshot({"neo4j": self.neo.running_pid()})
            return cpu.per_request(before, after, served.requests + answered.requests)["neo4j"]

        costs, seconds, done = await rounds_until(
            limit, neo4j_ms, lambda costs: len(costs) > 1 and settled(costs[-2], costs[-1]),
            lambda n, cost: f"{w.name}: settling, Neo4j {cost} ms a request over both sides' "
                            "slices")
        if not done:
            say(f"{w.name}: not settled within BENCH_WORKLOAD_SETTLE={limit:g}s")
        return {"seconds": round(seconds), "pairs": len(costs), "neo4j_ms": costs}

    async def service_side(self, w: Workload, ctx: Context, rng: random.Random, *,
                           settle: Callable[[], Awaitable[None]] | None = None,
                           tail: Callable[[], Awaitable[None]] | None = None,
                           service: Service | None = None,
                           rate: float | None = None) -> Result:
        """`settle`: awaited between the warm-up and the measured window; `tail`: awaited
        after the load, within the window (its CPU counted, its time not: requests a second
        are the load's); `service`: another than the run's (the audit
        trail's off side), warmed by its caller; `rate`: requests a second other than the
        workload's own (`rate`)."""
        cfg = self.cfg
        rate = self.rate(w) if rate is None else rate
        loadgen = self.loadgen if service is None else self.loadgen.at(service.url)
        service = service or self.service
        if warmup := self.warmup():
            await loadgen.run(http_pool(w, ctx, rng), warmup, rate)
        if settle is not None:
            await settle()
        pool = http_pool(w, ctx, rng)
        groups = {"service": service.pid, "neo4j": self.neo.running_pid(),
                  "loadgen": os.getpid()}
        return await self.measured(w, "service", ctx, groups, service.figures,
                                   then(loadgen.run(pool, cfg.duration, rate), tail))

    def rate(self, w: Workload) -> float:
        """The fixed rate `w` is measured at on both sides (0: as fast as each is answered):
        `BENCH_WEBHOOK_RATE` for the outbox workload. In a closed loop the side that answers
        faster claims and records its deliveries in larger batches, so its CPU a create was
        lower for a reason that is not its own; at one rate both deliver as they go.
        `BENCH_FIXED_RATE` for the others (0 unless set): Neo4j's CPU a request falls as its
        requests come faster (more of them a wake-up of its threads), so a side that answers
        more a second pays less a request for it; at one rate that part is the same."""
        return self.cfg.webhook_rate if w.outbox else self.cfg.fixed_rate

    async def audit_on_off(self, names: list[str]) -> dict:
        """What the audit trail costs the whole service: each workload of `names` measured on
        the service as it is and on a second one beside it, started with the trail switched
        off (bench/unaudited), on the same Neo4j and data, in BENCH_AUDIT_ROUNDS rounds (or
        BENCH_ROUNDS) whose order turns about (on first in the first round). Measured one
        after the other (on, then a restart, then off), the two windows differed by more than
        the trail costs: once the trail cost create -13.9 %, in the run before 19.3 %. The off
        service is stopped after the rounds; the run's own serves the rest."""
        chosen = [w for w in WORKLOADS if w.name in names and not w.outbox]
        for w in WORKLOADS:
            if w.name in names and w.outbox:  # its deliveries need a phase of their own
                say(f"BENCH_AUDIT_OFF: {w.name} is not measured on and off")
        if not chosen:
            return {}

        def rng(w: Workload, mode: str, n: int) -> random.Random:
            return random.Random(f"{w.name}-{mode}-{n}")  # noqa: S311 - request variety

        off = Service(self.cfg, self.neo, self.kek, unaudited=True, port=self.cfg.port + 2)
        windows: dict[str, dict[str, list[Result]]] = {
            w.name: {"on": [], "off": []} for w in chosen}
        try:
            off.start()
            say(f"a second service beside the first, with the audit trail off "
                f"(bench/unaudited), on {off.url}")
            # Both services warmed alike first, whatever BENCH_WARMUP (the off one starts
            # cold, and the run's may have been restarted by the webhook phase); then each
            # window has the usual warm-up.
            for w in chosen:
                for service in (self.service, off):
                    await self.loadgen.at(service.url).run(
                        http_pool(w, self.context(), rng(w, "warm", 0)),
                        max(self.cfg.warmup, 15.0))
            self.warmed = True
            for n in range(self.cfg.audit_round_count):
                for w in chosen:
                    for mode in ("on", "off") if n % 2 == 0 else ("off", "on"):
                        windows[w.name][mode].append(await self.service_side(
                            w, self.context(), rng(w, mode, n),
                            service=None if mode == "on" else off))
        finally:
            off.stop()
        return {name: audit_rounds(sides["on"], sides["off"], AUDIT_TARGETS.get(name))
                for name, sides in windows.items()}

    async def bare_side(self, w: Workload, ctx: Context, rng: random.Random, *,
                        settle: Callable[[], Awaitable[None]] | None = None,
                        tail: Callable[[], Awaitable[None]] | None = None,
                        rate: float | None = None) -> Result:
        """`settle`, `tail` and `rate` as for `service_side`."""
        cfg = self.cfg
        rate = self.rate(w) if rate is None else rate
        op = bare_op(w, ctx)
        if cfg.warmup > 0:
            await run_bare(op, w.items(ctx, rng), cfg.concurrency, cfg.warmup, rate=rate)
        if settle is not None:
            await settle()
        # The bare side's client is this process: the driver and the load loop in one.
        groups = {"neo4j": self.neo.running_pid(), "client": os.getpid()}
        return await self.measured(w, "bare", ctx, groups, stalls.from_registry, then(
            run_bare(op, w.items(ctx, rng), cfg.concurrency, cfg.duration, rate=rate), tail))

    async def measured(self, w: Workload, side: str, ctx: Context, groups: dict[str, int],
                       figures: Callable[[], dict[str, float]],
                       run: Awaitable[Result]) -> Result:
        """`run`, with what each side reports over its window: CPU per request of `groups`,
        audit events per group commit, Neo4j transactions per request, Neo4j's checkpoints,
        discarded plans and JVM stops, its CPU a request by thread kind (`threads_ms`), and
        the side's own process's stalls."""
        # The stand-in servers (the proxy's destination, webhook_create's receiver) are
        # neither side's: each one running is a group of its own, left out of the others'.
        groups = {**groups, **{name: server.pid for name, server in (
            ("destination", self.destination), ("receiver", self.receiver)) if server.running}}
        tx_before, log_mark = await transaction_number(ctx), self.debug_log.mark()
        pause_mark, figures_before = self.pause_log.mark(), figures()
        before, threads_before = cpu.snapshot(groups), cpu.threads(self.neo.running_pid())
        result = await self.recorded(w, side, run)
        # Read before the scrape below, which costs the service CPU.
        after, threads_after = cpu.snapshot(groups), cpu.threads(self.neo.running_pid())
        threads = cpu.per_request({}, threads_after.since(threads_before), result.requests)
        figures_after = figures()
        return replace(result, neo4j_background={**self.debug_log.since(log_mark),
                                                 **self.pause_log.since(pause_mark),
                                                 "threads_ms": threads},
                       stalls=stalls.between(figures_before, figures_after),
                       cpu_ms={**cpu.per_request(before, after, result.requests),
                               "neo4j_jit": threads["jit"],
                               "neo4j_index_sampling": threads.get("index_sampling")},
                       audit_batch_mean=stalls.batch_mean(figures_before, figures_after),
                       neo4j_tx=transactions_per_request(tx_before, await transaction_number(ctx),
                                                         result.requests))

    async def recorded(self, w: Workload, side: str, run: Awaitable[Result]) -> Result:
        """`run`, its span kept from the run's JFR recording when BENCH_JFR is set."""
        if self.jfr is None:
            return await run
        begin = datetime.now(UTC)
        result = await run
        # Copied out later (jfr_summary): a copy made now would cost Neo4j CPU that the
        # window's reading, taken after this returns, would count.
        kept = self.windows.setdefault(w.name, {}).setdefault(side, [])
        self.jfr_files += 1
        out = self.cfg.work_dir / f"jfr-{self.jfr_files:03d}-{w.name}-{side}.jfr"
        kept.append(jfr.Window(out, begin, datetime.now(UTC)))
        return result

    async def start_jfr(self) -> None:
        """BENCH_JFR's recording, started before the JVM warm-up (bench/jfr.py says why)."""
        recording = jfr.Recording(self.neo.running_pid(), self.cfg.jfr_period_ms)
        if await recording.start():
            self.jfr = recording

    async def jfr_summary(self, name: str) -> dict | None:
        """The workload's JFR samples by side, its windows together: each window copied out of
        the run's recording now, between windows."""
        sides = self.windows.pop(name, None)  # the next summary of `name` has its own windows
        if self.jfr is None or not sides:
            return None
        summary = {}
        for side, windows in sides.items():
            copied = [window for window in windows
                      if await self.jfr.dump(window)]
            for window in copied:
                say(f"JFR of Neo4j, {name} ({side}): {window.recording}")
            summary[side] = jfr.summarize(copied)
        return summary

    async def floor(self) -> dict:
        """The HTTP floor: the service's CPU a request on FLOOR's public route (`GET /health`,
        no database work, the whole middleware chain), loaded as the workloads' service side
        is, in BENCH_ROUNDS windows. It measures the machine: what the same code adds over the
        bare client rises and falls with it, so each workload's added CPU is also given above
        it (`added_above_floor_ms`)."""
        ctx = self.context()
        rng = random.Random(FLOOR.name)  # noqa: S311 - the workloads' seeding
        windows, rounds_ms = [], []
        for _ in range(max(1, self.cfg.rounds)):
            one = await self.service_side(FLOOR, ctx, rng)
            windows.append(one)
            rounds_ms.append((one.cpu_ms or {}).get("service"))
            say(f"{FLOOR.name}: service {one.rps:,.0f} req/s, {rounds_ms[-1]} ms of the "
                "service's CPU a request")
        both = combined(windows)
        return {"title": FLOOR.title, "service": both.to_dict(), "rounds_ms": rounds_ms,
                "ms": (both.cpu_ms or {}).get("service") if both.errors == 0 else None}

    async def workload(self, w: Workload) -> dict:
        ctx = self.context()
        rng = random.Random(w.name)  # noqa: S311 - request variety
        entry: dict = {"title": w.title, **({"fixed_rate": rate} if (rate := self.rate(w)) else {})}
        status, body = probe(self.service.url, self.tenant.app_key,
                             w.http(w.items(ctx, rng)[0]))
        entry["probe_status"] = status
        if body is not None and isinstance(body.get("data"), list):
            entry["probe_items"] = len(body["data"])  # a list page must be full (50)
        if w.route_probe and status in (404, 405):
            say(f"{w.name}: the route answers {status}: not available")
            entry.update(available=False, service=None, bare=None, ratio=None,
                         note=f"route not available (probe answered {status})")
            return entry
        if status >= 400:
            say(f"{w.name}: the probe request answered {status}; measuring anyway")
        entry["settle"] = await self.settle_workload(w, ctx)
        sides = await self.in_rounds(w, ctx, rng, self.rate(w))
        service, bare = sides["service"], sides["bare"]
        if len(sides["rounds"]) > 1:
            entry["rounds"] = sides["rounds"]
        entry["service_rss_mib_after"] = sides["service_rss_mib_after"]
        entry.update(available=True, service=service.to_dict(),
                     bare=bare.to_dict() if bare else None, ratio=ratio(service, bare))
        entry.update(added_cpu(service, bare, w.added_cpu_target_ms) or {})
        entry.update(sides["checkpoints"])
        if summary := await self.jfr_summary(w.name):  # the closed loop's windows alone
            entry["neo4j_jfr"] = summary
        # A workload measured at a fixed rate (`rate`) is at one rate already.
        rate = 0 if self.rate(w) else one_rate(service.rps, bare.rps, self.cfg.one_rate,
                                               self.cfg.concurrency)
        if rate:
            say(f"{w.name}: both sides again at one rate, {rate:,.0f} req/s")
            at_rate = await self.in_rounds(w, ctx, rng, rate)
            entry["service_rss_mib_after"] = at_rate["service_rss_mib_after"]
            entry["at_one_rate"] = {
                "rate": rate, "service": at_rate["service"].to_dict(),
                "bare": at_rate["bare"].to_dict(), "ratio": ratio(at_rate["service"],
                                                                  at_rate["bare"]),
                "rounds": at_rate["rounds"],
                **(added_cpu(at_rate["service"], at_rate["bare"], w.added_cpu_target_ms)
                   or {}),
                **at_rate["checkpoints"]}
            if summary := await self.jfr_summary(w.name):
                entry["at_one_rate"]["neo4j_jfr"] = summary
        elif rate is None and self.cfg.one_rate:
            say(f"{w.name}: not measured at one rate (the slower side's closed loop is too "
                "slow for a rate of at least BENCH_CONCURRENCY / 10)")
        if w.items_per_request > 1:
            entry["items_per_request"] = w.items_per_request
            entry["service_tokens_per_s"] = round(service.rps * w.items_per_request, 1)
        return entry

    async def in_rounds(self, w: Workload, ctx: Context, rng: random.Random,
                        rate: float) -> dict:
        """Both sides of `w` at `rate` (0: a closed loop), BENCH_ROUNDS windows each: each
        side's windows together (`service`, `bare`), each round's figures (`rounds`), what the
        checkpoints did to Neo4j's difference (`checkpoints`) and the service's memory after
        its last window (`service_rss_mib_after`). The service's side first, unless
        BENCH_BARE_FIRST; with BENCH_ROUNDS, the order turns about each round. A difference
        between the sides that follows the order (the store a write workload leaves, a JVM
        still compiling) shows so, and rounds average it out."""
        sides: dict[str, list[Result]] = {"service": [], "bare": []}
        firsts: list[str] = []
        rss_mib = None
        for n in range(max(1, self.cfg.rounds)):
            order = ["service", "bare"]
            if self.cfg.bare_first != (n % 2 == 1):
                order.reverse()
            firsts.append(order[0])
            for side in order:
                if side == "service":
                    say(f"{w.name}: service via {self.loadgen.name}, "
                        f"{self.cfg.concurrency} connections")
                    one = await self.service_side(w, ctx, rng, rate=rate)
                    rss_mib = memory.mib(memory.tree_rss_bytes(self.service.pid))
                else:
                    one = await self.bare_side(w, ctx, rng, rate=rate)
                sides[side].append(one)
                say(f"{w.name}: {side:<7} {one.rps:,.0f} req/s, p50 {one.p50_ms:.1f} ms"
                    + (f" (at {rate:,.0f} a second)" if rate else ""))
        rounds = [{"first": first, "service": s.to_dict(), "bare": b.to_dict(),
                   "ratio": ratio(s, b), **(added_cpu(s, b, w.added_cpu_target_ms) or {})}
                  for first, s, b in zip(firsts, sides["service"], sides["bare"], strict=True)]
        return {"service": combined(sides["service"]), "bare": combined(sides["bare"]),
                "rounds": rounds, "service_rss_mib_after": rss_mib,
                "checkpoints": neo4j_added_outside_checkpoints(sides["service"], sides["bare"])}

    async def outbox_workload(self, w: Workload) -> dict:
        """`w` with one subscribed webhook, each side delivering its own events to the
        receiver: the service through its own sender (the outbox write and the delivery, both
        in its CPU and its Neo4j's), the bare client through its delivery loop
        (bench/outbox.py). Measured after every other workload (bench_main), after a JVM
        warm-up of its own (`warm_outbox`). The service's sender claims whatever delivery is
        due, so it must not run while the bare side's events wait: the service is stopped for
        the bare window (nothing of it runs then) and started again after it, and the next
        measured workload gets the longer first warm-up. Each side has a webhook of its own,
        subscribed before its warm-up and disabled once its deliveries are drained. The
        warm-up's deliveries are drained before the window, so it starts with an empty outbox,
        and the window lasts past the load until the load's are drained too: each side's CPU
        a create holds that create's delivery, however far behind its deliveries ran. Its
        `ratio` is of creates a second over the load and the drain (`ratio_basis`), so a side
        that falls behind is not paid for it; `ratio_load`, of the load's alone. Reported per
        side (`outbox`): the deliveries that arrived during the load and per second, those
        pending at its end, how long they took to drain, their lag, what the receiver refused
        (a bad signature), its webhook's attempts' durations (its warm-up's too), and on the
        bare side the claims and records its loop ran."""
        entry: dict = {"title": w.title, "outbox": {}, "fixed_rate": self.rate(w) or None}
        if refused := outbox_refused():
            say(f"{w.name}: not measured: {refused}")
            entry.update(available=False, service=None, bare=None, ratio=None, note=refused)
            return entry
        ctx = self.context()
        rng = random.Random(w.name)  # noqa: S311 - request variety
        repo = WebhookRepository(self.db)
        entry["jvm_warmup"] = await self.warm_outbox(w)
        deliveries: outbox.BareDeliveries | None = None

        async def side(name: str, measure: Callable[..., Awaitable[Result]]) -> Result:
            webhook_id, secret = await outbox.subscribe(
                repo, self.tenant.tenant_id, self.tenant.keys,
                f"{self.receiver.url}/hook/{name}", name)
            await self.receiver_call("PUT", f"/secret/{name}", secret)
            marks: dict = {}

            async def settle() -> None:
                marks["drain_before_s"], marks["pending_before"] = await self.drain(webhook_id)
                marks["since"] = (await self.receiver_call("GET", f"/stats/{name}"))["received"]
                if deliveries is not None:
                    marks["counts_before"] = deliveries.counts()

            async def tail() -> None:
                marks["got"] = await self.receiver_call("GET", f"/stats/{name}")
                marks["pending_at_end"] = await outbox.pending(self.db.driver, self.db.database,
                                                               webhook_id)
                marks["drain_s"], marks["pending_after_drain"] = await self.drain(webhook_id)
                if deliveries is not None:
                    marks["counts_after"] = deliveries.counts()

            result = await measure(settle=settle, tail=tail)
            # The window's figures, read before a profile's run delivers more.
            final = await self.receiver_call("GET", f"/stats/{name}?since={marks['since']}")
            states = await outbox.states(self.db.driver, self.db.database, webhook_id)
            attempts = await outbox.attempt_ms(self.db.driver, self.db.database, webhook_id)
            if name == "service" and self.cfg.profile:
                self.outbox_profile = await self.profile_workload(w)
                await self.drain(webhook_id)
            await outbox.unsubscribe(repo, self.tenant.tenant_id, webhook_id)
            delivered = marks["got"]["received"] - marks["since"]
            o = entry["outbox"][name] = {
                "created_per_s": round(result.rps, 1),
                "created_per_s_with_drain": with_drain(result, marks["drain_s"]),
                "delivered_during_load": delivered,
                "delivered_per_s": round(delivered / result.seconds, 1) if result.seconds else None,
                **{k: marks[k] for k in ("pending_at_end", "drain_s", "pending_after_drain",
                                         "pending_before", "drain_before_s")},
                "lag_p50_ms": final["lag_p50_ms"], "lag_p99_ms": final["lag_p99_ms"],
                "received_bad": final["bad"], "deliveries": states, **attempts}
            if "counts_after" in marks:
                o.update(loop_statements(marks["counts_before"], marks["counts_after"]))
            say(f"{w.name} ({name}): {o['delivered_per_s']} deliveries/s during the load, "
                f"{o['pending_at_end']} pending at its end (drained in {o['drain_s']}s within "
                f"the window, {o['pending_after_drain']} left), lag p99 {o['lag_p99_ms']} ms, "
                f"{o['received_bad']} refused by the receiver")
            return result

        status, _ = probe(self.service.url, self.tenant.app_key, w.http(w.items(ctx, rng)[0]))
        entry["probe_status"] = status
        if status >= 400:
            say(f"{w.name}: the probe request answered {status}; measuring anyway")
        say(f"{w.name}: service via {self.loadgen.name}, {self.cfg.concurrency} connections, "
            "its sender delivering")
        service = await side("service", functools.partial(self.service_side, w, ctx, rng))
        entry["service_rss_mib_after"] = memory.mib(memory.tree_rss_bytes(self.service.pid))
        # The service that served every workload, before it is stopped (the run's
        # `memory_at_end` reads the one started after this phase).
        entry["memory_before_restart"] = await self.memory()
        say(f"{w.name}: service {service.rps:,.0f} req/s, p50 {service.p50_ms:.1f} ms")
        self.service.stop()
        say(f"{w.name}: service stopped for the bare window (its sender would deliver the bare "
            "side's events)")
        deliveries = outbox.BareDeliveries(ctx.webhooks, self.tenant.keys, self.session,
                                           bare_settings())
        ctx.outbox = deliveries.start()
        try:
            bare = await side("bare", functools.partial(self.bare_side, w, ctx, rng))
        finally:
            await deliveries.stop()
            ctx.outbox = None
            self.service = Service(self.cfg, self.neo, self.kek)
            self.service.start()
            self.warmed = False  # a new service: the next workload's warm-up is the first's
        # The service runs one sender per worker, each within the settings' bounds; the bare
        # loop is one process's.
        entry["outbox"]["service"]["senders"] = Settings.from_env(
            workers=int(service_workers())).worker_count
        entry["outbox"]["bare"].update(senders=1, failed_attempts=deliveries.failed,
                                       errors=deliveries.errors,
                                       first_error=deliveries.first_error)
        say(f"{w.name}: bare    {bare.rps:,.0f} req/s, p50 {bare.p50_ms:.1f} ms")
        drained = [entry["outbox"][s]["created_per_s_with_drain"] for s in ("service", "bare")]
        entry.update(available=True, service=service.to_dict(), bare=bare.to_dict(),
                     ratio=round(drained[0] / drained[1], 3) if drained[0] and drained[1]
                     else None, ratio_load=ratio(service, bare), ratio_basis="with_drain")
        entry.update(added_cpu(service, bare, w.added_cpu_target_ms) or {})
        if summary := await self.jfr_summary(w.name):
            entry["neo4j_jfr"] = summary
        return entry

    async def drain(self, webhook_id: str) -> tuple[float, int]:
        """Until none of the webhook's deliveries is pending (at most a minute, or four
        windows): (seconds, pending left)."""
        return await outbox.drain(self.db.driver, self.db.database, webhook_id,
                                  within=max(60.0, 4 * self.cfg.duration))

    async def receiver_call(self, method: str, path: str, body: str = "") -> dict:
        async with self.session.request(method, self.receiver.url + path,
                                        data=body.encode()) as resp:
            resp.raise_for_status()
            return await resp.json() if resp.status == 200 else {}

    async def profile_workload(self, w: Workload) -> dict:
        """py-spy of the service while `w` runs once more, then of this process while its bare
        client runs `w` as long (after the measurement, so the sampling costs the measured
        figures nothing). The collapsed stacks are kept gzipped beside the results (speedscope
        and flamegraph.pl read them unzipped), summarised in the JSON with what a request costs
        the service and not the bare client under the same load, by category and function."""
        ctx = self.context()
        rng = random.Random("profile-" + w.name)  # noqa: S311
        seconds = max(5.0, self.cfg.duration)
        self.cfg.profile_dir.mkdir(parents=True, exist_ok=True)
        raw = self.cfg.profile_dir / f"{w.name}.collapsed.txt"
        before = cpu.snapshot({"service": self.service.pid})
        recorded, served = await asyncio.gather(
            profile.record(self.service.pid, seconds - 1, raw),
            self.loadgen.run(http_pool(w, ctx, rng), seconds, self.rate(w)))
        service_ms = cpu.per_request(before, cpu.snapshot({"service": self.service.pid}),
                                     served.requests)["service"]
        if recorded is None:
            return {"error": "py-spy unavailable or failed"}
        summary = profile.summarize(recorded)
        service_split = profile.cpu_per_request(recorded, service_ms or 0.0)
        kept = profile.compress(recorded)
        say(f"profile of {w.name}: {kept}")
        if w.outbox or w.bare is None:  # the outbox's: profiled in the service's phase,
            # where the bare side has no webhook; the HTTP floor's: it has no bare side
            return {**summary, "collapsed": str(kept.relative_to(ROOT))}
        # The bare client is this process: its own CPU, not its children's (py-spy, Neo4j).
        bare_raw = self.cfg.profile_dir / f"{w.name}.bare.collapsed.txt"
        ticks = cpu.own_ticks(os.getpid())
        bare_recorded, answered = await asyncio.gather(
            profile.record(os.getpid(), seconds - 1, bare_raw),
            run_bare(bare_op(w, ctx), w.items(ctx, rng), self.cfg.concurrency, seconds,
                     rate=self.rate(w)))
        bare_ms = (cpu.own_ticks(os.getpid()) - ticks) * cpu.TICK_MS / max(answered.requests, 1)
        if bare_recorded is None:
            return {**summary, "collapsed": str(kept.relative_to(ROOT))}
        added = profile.difference(service_split,
                                   profile.cpu_per_request(bare_recorded, bare_ms))
        bare_kept = profile.compress(bare_recorded)
        say(f"profile of {w.name}'s bare client: {bare_kept}; a request, service "
            f"{added['service_ms']} ms, bare client {added['bare_ms']} ms: "
            + ", ".join(f"{k} {v:+.3f}" for k, v in added["by_category_ms"]))
        return {**summary, "collapsed": str(kept.relative_to(ROOT)),
                "bare_collapsed": str(bare_kept.relative_to(ROOT)), "added_under_load": added}


def bare_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The bare client's settings: those the service reads from the same environment, for one
    process — its audit writer's (`VAULTGRAPH_AUDIT_BATCH_MAX`, `_BATCH_WAIT`, `_LANES`: two
    lanes unless set) and its collector's — so a setting tried on the service is tried on its
    limit too."""
    return Settings.from_env(environ, workers=1)


def on_service_loop(main: Coroutine[Any, Any, Any]) -> Any:
    """`main` run on the event loop the service serves on (`VAULTGRAPH_EVENT_LOOP`: uvloop
    unless set): a harness whose process runs the bare client runs it so, or the bare
    client's CPU holds the pure-Python loop's overhead that the service does not pay (on
    asyncio's loop a get's bare client ran 8 % more instructions)."""
    return run_loop(bare_settings(), main)


def outbox_refused(environ: Mapping[str, str] | None = None) -> str | None:
    """Why an outbox workload cannot be measured under this environment, or None."""
    if bare_settings(environ).webhook_poll_interval <= 0:
        return ("VAULTGRAPH_WEBHOOK_POLL_INTERVAL <= 0: the service's webhook sender does not "
                "run, so its deliveries would never be made")
    return None


def with_drain(result: Result, drain_s: float | None) -> float | None:
    """Creates a second over the load and the drain of its deliveries that followed it."""
    seconds = result.seconds + (drain_s or 0.0)
    return round((result.requests - result.errors) / seconds, 1) if seconds > 0 else None


def loop_statements(before: dict[str, int], after: dict[str, int]) -> dict:
    """The bare delivery loop's statements between two `counts()`: claims (and of them those
    that found nothing), outcome records, and the statements a delivery."""
    d = {k: after[k] - before[k] for k in after}
    attempts = d["delivered"] + d["failed"]
    return {"claims": d["claims"], "empty_claims": d["empty_claims"], "records": d["records"],
            "statements_per_delivery": round((d["claims"] + d["records"]) / attempts, 3)
            if attempts else None}


# -- entry points --------------------------------------------------------------------------

def header(cfg: BenchConfig) -> dict:
    # The service's processes (VAULTGRAPH_WORKERS; unset: half the CPUs, as make run) and
    # each one's audit lanes, as the service resolves them from the same environment.
    service = Settings.from_env(workers=int(service_workers()))
    return {**provenance(),
            "settings": {"duration_s": cfg.duration, "warmup_s": cfg.warmup,
                         "service_workers": service.worker_count,
                         "service_audit_lanes": service.audit_lane_count,
                         "concurrency": cfg.concurrency, "neo4j_heap": cfg.neo4j_heap,
                         "neo4j_pagecache": cfg.neo4j_pagecache,
                         "first_side": "bare" if cfg.bare_first else "service",
                         "rounds": cfg.rounds,
                         "audit_rounds": cfg.audit_round_count if cfg.audit_off_workloads()
                         else None}}


async def bench_main(cfg: BenchConfig, neo: LocalNeo4j) -> dict:
    b = Bench(cfg, neo)
    began = time.monotonic()
    try:
        await b.setup(outbox_phase=True)
        await b.load_to(cfg.tokens)
        result = {**header(cfg), "loadgen": b.loadgen.name, "workloads": {},
                  "memory_at_rest": await b.memory()}
        if cfg.plans:
            result["plans"] = {w.name: await plans.profile_workload(w, b.context())
                               for w in WORKLOADS if cfg.selected(w.name) and w.bare
                               and not w.outbox}
            for w in WORKLOADS:
                if w.outbox and cfg.selected(w.name):
                    say(f"BENCH_PLANS: {w.name} is not profiled (its bare step without a "
                        "webhook subscribed would be a plain create)")
        if cfg.jfr:
            await b.start_jfr()
        result["jvm_warmup"] = await b.warm_jvm(
            [w for w in WORKLOADS if cfg.selected(w.name) and w.bare])
        if cfg.selected(FLOOR.name):  # before the workloads: it writes nothing
            result["http_floor"] = await b.floor()
            if cfg.profile:
                result.setdefault("profile", {})[FLOOR.name] = await b.profile_workload(FLOOR)
        # Outbox workloads last, whatever the order: after their phase the service's sender
        # knows the bench tenant and wakes on its writes, which no other window may pay.
        for w in sorted(WORKLOADS, key=lambda w: w.outbox):
            if not cfg.selected(w.name):
                continue
            if w.outbox:  # a phase of its own: the service is restarted within it
                result["workloads"][w.name] = await b.outbox_workload(w)
                if cfg.profile:
                    result.setdefault("profile", {})[w.name] = b.outbox_profile
            else:
                result["workloads"][w.name] = await b.workload(w)
                if cfg.profile:
                    result.setdefault("profile", {})[w.name] = await b.profile_workload(w)
        above_floor(result["workloads"], (result.get("http_floor") or {}).get("ms"))
        if names := cfg.audit_off_workloads():
            result["audit_off"] = await b.audit_on_off(names)
        done = result["workloads"]
        if done.get("create", {}).get("service") and done.get("tokenize", {}).get("service"):
            # The target: batched creates at least 3x single creates, same run.
            result["tokenize_vs_create"] = round(
                done["tokenize"]["service_tokens_per_s"] / done["create"]["service"]["rps"], 2)
        result["stored_tokens"] = await stored_tokens(b)
        result["memory_at_end"] = await b.memory()
        result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        result["wall_seconds"] = round(time.monotonic() - began)
        return result
    finally:
        await b.teardown()


async def scale_main(cfg: BenchConfig, neo: LocalNeo4j) -> dict:
    b = Bench(cfg, neo)
    began = time.monotonic()
    wanted = {w.name: w for w in WORKLOADS
              if w.name in ("get", "list", "search_metadata", "search_descendant",
                              "search_ancestor")}
    try:
        await b.setup()
        result = {**header(cfg), "loadgen": b.loadgen.name, "sizes": {}}
        loaded = 0.0
        for size in cfg.sizes():
            t0 = time.monotonic()
            await b.load_to(size)
            loaded += time.monotonic() - t0
            row: dict = {"load_seconds": round(loaded)}
            for name, w in wanted.items():
                rng = random.Random(f"{name}{size}")  # noqa: S311 - request variety
                res = await b.service_side(w, b.context(), rng)
                row[name] = res.to_dict()
                # After the measurement, so the cache holds what a steady load keeps in it.
                try:
                    row[name]["page_cache"] = await plans.page_cache(w, b.context())
                except Exception as exc:  # a figure lost, not the run
                    row[name]["page_cache"] = {"hit_ratio": None, "error": repr(exc)[:300]}
                say(f"{size:,} tokens: {name} p50 {res.p50_ms:.1f} ms, {res.rps:,.0f} req/s, "
                    f"page-cache hit ratio {row[name]['page_cache']['hit_ratio']}")
            row["memory"] = await b.memory()
            row["audit_events"] = await audit_events(b)
            result["sizes"][str(size)] = row
            write_results({**result, "partial": True}, "scale-")  # kept if a later size fails
        sizes = cfg.sizes()
        lo, hi = str(min(sizes)), str(max(sizes))
        result["p50_growth"] = {name: growth(result["sizes"][lo][name]["p50_ms"],
                                             result["sizes"][hi][name]["p50_ms"])
                                for name in wanted}
        result["p50_growth_between"] = [int(lo), int(hi)]
        result["wall_seconds"] = round(time.monotonic() - began)
        return result
    finally:
        await b.teardown()


async def soak_main(cfg: BenchConfig, neo: LocalNeo4j) -> dict:
    """The leak check: the get workload for BENCH_SOAK seconds after a warm-up, the service's
    resident set (and Neo4j's heap) sampled every BENCH_SOAK_SAMPLE seconds; it must settle,
    not climb (memory.soak_verdict)."""
    b = Bench(cfg, neo)
    began = time.monotonic()
    w = next(w for w in WORKLOADS if w.name == "get")
    try:
        await b.setup()
        await b.load_to(cfg.tokens)
        ctx = b.context()
        rng = random.Random("soak")  # noqa: S311 - request variety
        pool = http_pool(w, ctx, rng)
        result = {**header(cfg), "loadgen": b.loadgen.name, "workload": w.name,
                  "memory_at_rest": await b.memory(), "samples": []}
        if warmup := b.warmup():
            await b.loadgen.run(pool, warmup)
        requests = 0
        for n in range(1, max(1, round(cfg.soak / cfg.soak_sample)) + 1):
            res = await b.loadgen.run(pool, cfg.soak_sample)
            requests += res.requests
            mem = await b.memory()
            sample = {"seconds": round(n * cfg.soak_sample), "requests": requests,
                      "rps": res.rps, "p50_ms": res.p50_ms, "p99_ms": res.p99_ms,
                      "errors": res.errors, "service_rss_mib": mem["service_rss_mib"],
                      "neo4j_heap_used_mib": mem["neo4j_heap_mib"].get("used")}
            result["samples"].append(sample)
            say(f"soak {sample['seconds']}s: {res.rps:,.0f} req/s, service resident "
                f"{sample['service_rss_mib']} MiB")
        result["verdict"] = memory.soak_verdict(result["samples"])
        result["wall_seconds"] = round(time.monotonic() - began)
        return result
    finally:
        await b.teardown()


async def first_sight_main(cfg: BenchConfig, neo: LocalNeo4j) -> dict:
    """The first-sight latency of the worst search shapes (bench/first_sight.py)."""
    b = Bench(cfg, neo)
    began = time.monotonic()
    try:
        await b.setup()
        await b.load_to(cfg.tokens)

        async def clear_caches() -> None:
            await b.db.driver.execute_query("CALL db.clearQueryCaches()", database_="neo4j")

        result = {**header(cfg), "loadgen": b.loadgen.name, "stored_tokens": len(b.ids),
                  "first_sight": await first_sight.measure(
                      b.service.url, b.tenant.app_key, b.ids, clear_caches,
                      warmup=max(cfg.warmup, cfg.jvm_warmup))}
        result["wall_seconds"] = round(time.monotonic() - began)
        return result
    finally:
        await b.teardown()


def growth(small: float | None, large: float | None) -> float | None:
    """p50 at the largest size over p50 at the smallest; None when either never answered."""
    if not small or large is None:
        return None
    return round(large / small, 2)


async def stored_tokens(b: Bench) -> int:
    records, _, _ = await b.db.driver.execute_query(
        "MATCH (t:Token {tenant_id: $tenant_id}) RETURN count(t) AS n",
        tenant_id=b.tenant.tenant_id, database_="neo4j")
    return records[0]["n"]


async def audit_events(b: Bench) -> int:
    records, _, _ = await b.db.driver.execute_query(
        "MATCH (e:AuditEvent) RETURN count(e) AS n", database_="neo4j")
    return records[0]["n"]


def provenance() -> dict:
    """What every record opens with: when, from which commit (and whether the tree had changes
    beyond it), on what machine."""
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "git_sha": git_sha(),
            "git_dirty": git_dirty(), "machine": machine()}


def write_results(result: dict, stem: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    latest = RESULTS / f"{stem}latest.json"
    latest.write_text(text)
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    (RESULTS / f"{stem}{day}-{result['git_sha']}.json").write_text(text)
    return latest


async def transaction_number(ctx: Context) -> int:
    """The number of the newest transaction begun in the benchmark's database: Neo4j numbers
    them in order (`neo4j-transaction-N`), and the statement that asks is one of them, so the
    difference between two readings is the transactions begun between them, plus one."""
    records, _, _ = await ctx.driver.execute_query(
        "SHOW TRANSACTIONS YIELD transactionId, database WHERE database = $db "
        "RETURN transactionId", db=ctx.database, database_=ctx.database)
    return max(int(r["transactionId"].rsplit("-", 1)[1]) for r in records)


def transactions_per_request(first: int, second: int, requests: int) -> float | None:
    """Transactions begun per request between two `transaction_number` readings."""
    return round((second - first - 1) / requests, 3) if requests else None


def main(argv: list[str]) -> int:
    cfg = BenchConfig.from_env()
    scale, soak, first = "--scale" in argv, "--soak" in argv, "--first-sight" in argv
    # The bare client collects its garbage as a serving process does (server.tune_gc): with
    # Python's threshold this process spent 9 % of its CPU in the collector (the driver's
    # per-statement cycles, and the loaded ids in every full collection), which understated
    # the limit the service is compared with.
    tune_gc(bare_settings())
    neo = None
    try:
        # Started outside the event loop: the launcher runs its own loop while it waits.
        neo = start_neo4j(cfg)
        main = (scale_main if scale else soak_main if soak
                else first_sight_main if first else bench_main)
        result = on_service_loop(main(cfg, neo))
    except KeyboardInterrupt:
        say("interrupted: everything the benchmark started is stopped")
        return 130
    finally:
        if neo is not None:
            neo.stop()
    if scale:  # stopped, Neo4j has checkpointed: its files hold everything
        try:
            result["disk_mib"] = {k: memory.mib(v)
                                  for k, v in memory.store_bytes(cfg.neo4j_home).items()}
        except OSError as exc:
            say(f"the store's size could not be read: {exc}")
    path = write_results(result, "scale-" if scale else "soak-" if soak
                         else "first-sight-" if first else "")
    print(report.scale_table(result) if scale else report.soak_table(result) if soak
          else first_sight.table(result) if first else report.table(result))
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
