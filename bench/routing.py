"""What the routing driver costs the client against one server (docs/performance.md,
"Other benchmarks"; docs/adr/0032-a-direct-connection-to-the-local-server.md), against a fresh
Neo4j of its own: the same small read sent through a `neo4j://` driver (a routing table,
an address chosen for every connection acquired) and through a `bolt://` one (a direct
connection), one statement at a time and 32 at a time, in alternating blocks. Reported: the
client process's CPU and the wall time per statement, the medians of each scheme's blocks after
its first two (warm-up).

    .venv/bin/python -m bench.routing
"""

from __future__ import annotations

import asyncio
import statistics
import time

import neo4j

from .audit_storage import fresh_neo4j
from .environment import say

SCHEMES = ("neo4j", "bolt")
BLOCKS = 12       # alternating blocks per scheme; the first two are warm-up
PER_BLOCK = 2_000
CONCURRENCY = (1, 32)


async def block(driver: neo4j.AsyncDriver, concurrency: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per statement over PER_BLOCK statements, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate, driver.session(database="neo4j") as session:
            result = await session.run("MATCH (p:RoutingProbe {i: $i}) RETURN p.i AS i",
                                       i=i % 20)
            [record async for record in result]

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(PER_BLOCK)))
    return ((time.process_time() - cpu) * 1000 / PER_BLOCK,
            (time.perf_counter() - wall) * 1000 / PER_BLOCK)


async def measure(neo) -> dict:
    host = neo.uri.split("://", 1)[1]
    auth = ("neo4j", neo.resolve_password())
    drivers = {s: neo4j.AsyncGraphDatabase.driver(f"{s}://{host}", auth=auth) for s in SCHEMES}
    out: dict = {}
    try:
        await drivers["bolt"].execute_query(
            "UNWIND range(0, 19) AS i MERGE (:RoutingProbe {i: i})", database_="neo4j")
        for concurrency in CONCURRENCY:
            blocks: dict[str, list[tuple[float, float]]] = {s: [] for s in SCHEMES}
            for n in range(BLOCKS):
                for scheme in (SCHEMES if n % 2 else tuple(reversed(SCHEMES))):
                    blocks[scheme].append(await block(drivers[scheme], concurrency))
            out[concurrency] = {
                s: {"cpu_ms": round(statistics.median(c for c, _ in b[2:]), 4),
                    "wall_ms": round(statistics.median(w for _, w in b[2:]), 4)}
                for s, b in blocks.items()}
            say(f"{concurrency} at a time, per statement: " + "; ".join(
                f"{s}:// CPU {v['cpu_ms']} ms, wall {v['wall_ms']} ms"
                for s, v in out[concurrency].items()))
    finally:
        for driver in drivers.values():
            await driver.close()
    return out


def main() -> int:
    with fresh_neo4j("routing-ab", heap="512m", pagecache="256m") as neo:
        neo.start()
        asyncio.run(measure(neo))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
