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
