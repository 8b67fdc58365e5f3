"""Closed-loop load: wrk (C, Lua, ~no CPU next to the service) or an aiohttp fallback, and the
bare-driver clients. Each returns a `stats.Result` for the measured window only.

Each can also hold a fixed rate (`rate`, requests a second; 0 runs as fast as it is answered):
requests are sent on a schedule `1 / rate` apart, each connection or coroutine taking the next
free slot when its previous request is answered, so a side answering faster than the rate waits
and one answering slower sends at once and runs below it (the schedule never bursts to catch
up). Two sides at one rate do the same work a second, so their CPU a request compares work
that batches alike (group commits, webhook claims)."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import orjson

from .stats import Result
from .workloads import Request

LUA = Path(__file__).resolve().parent / "wrk_pool.lua"
_RESULT = re.compile(r"^BENCH_JSON (\{.*\})$", re.MULTILINE)


def ensure_wrk() -> str | None:
    """The wrk binary, installed from Debian's packages when missing (root only)."""
    found = shutil.which("wrk")
    if found or not shutil.which("apt-get") or os.geteuid() != 0:
        return found
    print("[bench] installing wrk from Debian's packages", file=sys.stderr, flush=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=False,  # noqa: S607
                   stdout=subprocess.DEVNULL)
    if not shutil.which("wrk"):
        subprocess.run(["apt-get", "update", "-q"], check=False,  # noqa: S607
                       stdout=subprocess.DEVNULL)
        subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=False,  # noqa: S607
                       stdout=subprocess.DEVNULL)
    return shutil.which("wrk")


def write_pool(path: Path, requests: Sequence[Request]) -> None:
    """One request a line, tab-separated: method, path, content type, body (JSON has no tabs)."""
    with open(path, "wb") as f:
        for r in requests:
            f.write(b"\t".join((r.method.encode(), r.path.encode(), r.content_type.encode(),
                                r.body)) + b"\n")


def parse_wrk(text: str, returncode: int | None) -> Result:
    """The `BENCH_JSON {...}` line a wrk script's `done()` prints (bench/wrk_pool.lua), as a
    Result; RuntimeError with wrk's output when it failed or printed none."""
    match = _RESULT.search(text)
    if returncode != 0 or match is None:
        raise RuntimeError(f"wrk failed ({returncode}): {text[-2000:]}")
    raw = orjson.loads(match.group(1))
    errors = sum(raw[k] for k in ("connect", "read", "write", "status", "timeout"))
    # wrk counts responses (any status) as requests; timed-out requests only as errors, and
    # its latency histogram holds responses only: no response, no percentile.
    answered = raw["requests"]
    nan = float("nan")
    return Result(requests=answered + raw["timeout"] + raw["connect"], errors=errors,
                  seconds=raw["duration_us"] / 1e6,
                  p50_ms=raw["p50"] / 1000 if answered else nan,
                  p99_ms=raw["p99"] / 1000 if answered else nan,
                  p999_ms=raw["p999"] / 1000 if answered else nan)


class Wrk:
    name = "wrk"

    def __init__(self, binary: str, url: str, key: str, concurrency: int, threads: int,
                 work_dir: Path):
        self.binary, self.url, self.key = binary, url, key
        self.concurrency, self.threads, self.work_dir = concurrency, threads, work_dir

    def at(self, url: str) -> Wrk:
        """The same load generator aimed at another service."""
        return Wrk(self.binary, url, self.key, self.concurrency, self.threads, self.work_dir)

    async def run(self, pool: Sequence[Request], seconds: float, rate: float = 0.0) -> Result:
        pool_file = self.work_dir / "pool.tsv"
        write_pool(pool_file, pool)
        argv = [self.binary, f"-t{self.threads}", f"-c{self.concurrency}",
                f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s", str(LUA), self.url,
                "--", str(pool_file)]
        # wrk_pool.lua paces each thread at its share of the rate.
        return await run_wrk(argv, {"BENCH_KEY": self.key,
                                    "BENCH_THREAD_RATE": f"{rate / self.threads:g}"})


async def run_wrk(argv: list[str], env: dict[str, str]) -> Result:
    """Run wrk to its end (`env` added to ours) and parse its report; a run cancelled (the
    harness interrupted) kills wrk rather than leave it loading the service for its `-d`."""
    proc = await asyncio.create_subprocess_exec(
        *argv, env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await proc.communicate()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
        raise
    return parse_wrk(out.decode(errors="replace"), proc.returncode)


class PythonClient:
    """aiohttp closed loop: costs far more CPU than wrk, used only when wrk is unavailable."""

    name = "python-aiohttp"

    def __init__(self, url: str, key: str, concurrency: int):
        self.url, self.key, self.concurrency = url, key, concurrency

    def at(self, url: str) -> PythonClient:
        """The same load generator aimed at another service."""
        return PythonClient(url, self.key, self.concurrency)

    async def run(self, pool: Sequence[Request], seconds: float, rate: float = 0.0) -> Result:
        import aiohttp

        cycle = itertools.cycle(pool)
        latencies: list[float] = []
        errors = 0
        deadline = time.monotonic() + seconds
        pacer = Pacer(rate)

        async def worker(session):
            nonlocal errors
            while await pacer.wait() < deadline:
                r = next(cycle)
                headers = {"SVC-API-KEY": self.key}
                if r.content_type:
                    headers["Content-Type"] = r.content_type
                t0 = time.perf_counter()
                try:
                    async with session.request(r.method, self.url + r.path, headers=headers,
                                               data=r.body or None) as resp:
                        await resp.read()
                        ok = resp.status < 400
                except (aiohttp.ClientError, TimeoutError):
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - t0)
                else:
                    errors += 1

        connector = aiohttp.TCPConnector(limit=self.concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:
            began = time.monotonic()
            await asyncio.gather(*(worker(session) for _ in range(self.concurrency)))
            elapsed = time.monotonic() - began
        return Result.from_latencies(latencies, errors, elapsed)


class Pacer:
    """The send schedule of a fixed rate, shared by a side's connections or coroutines: `wait`
    sleeps until the next free slot (the slots `1 / rate` apart, never earlier than now) and
    returns its time (`time.monotonic()`). Rate 0: no waiting."""

    def __init__(self, rate: float):
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.next = time.monotonic()

    async def wait(self) -> float:
        now = time.monotonic()
        if not self.interval:
            return now
        slot = max(now, self.next)
        self.next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)
        return slot


async def run_bare(op: Callable[[object], Awaitable[None]], pool: Sequence[object],
                   concurrency: int, seconds: float, op_timeout: float = 10.0,
                   rate: float = 0.0) -> Result:
    """`concurrency` coroutines in this process, each running `op` on the next pool item
    (paced at `rate` requests a second when it is above 0).

    Like wrk's `--timeout 10s`, an operation that takes longer is abandoned and counted as an
    error, so a pathological statement cannot stretch the run past its window.
    """
    cycle = itertools.cycle(pool)
    latencies: list[float] = []
    errors = 0
    first_error: BaseException | None = None
    deadline = time.monotonic() + seconds
    pacer = Pacer(rate)

    async def worker():
        nonlocal errors, first_error
        while await pacer.wait() < deadline:
            item = next(cycle)
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(op_timeout):
                    await op(item)
            except Exception as exc:  # counted, and the first one is reported
                errors += 1
                first_error = first_error or exc
            else:
                latencies.append(time.perf_counter() - t0)

    began = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - began
    if first_error is not None:
        print(f"[bench] bare: {errors} errors, first: {type(first_error).__name__}: "
              f"{str(first_error)[:200]}", file=sys.stderr, flush=True)
    return Result.from_latencies(latencies, errors, elapsed)
