"""What the driver's shared bookmark manager carries and costs on one server (docs/operations.md
"Scale-out", docs/adr/0002-no-bookmarks-on-one-server.md), against a fresh Neo4j of its own:

1. how many bookmarks the manager holds — each is sent with the next statement — while 32
   concurrent writers each commit one small write after another through it (sampled every
   10 ms);
2. what a statement costs with that many bookmarks, with one, and with none: one connection,
   statements one after another (no concurrency to blur it), medians of alternating blocks.

    .venv/bin/python -m bench.bookmarks
"""

from __future__ import annotations

import asyncio
import statistics
import time

import neo4j

from .audit_storage import fresh_neo4j
from .environment import say

WRITERS = 32
BLOCKS = 12       # alternating blocks per variant; the first two are warm-up
PER_BLOCK = 2_000


async def held_under_load(driver: neo4j.AsyncDriver, seconds: float = 5.0) -> dict:
    manager = neo4j.AsyncGraphDatabase.bookmark_manager()
    sizes: list[int] = []
    stop = asyncio.Event()

    async def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            async with driver.session(bookmark_manager=manager) as session:
                await (await session.run("CREATE (:BookmarkProbe {w: $w, i: $i})",
                                         w=n, i=i)).consume()
            i += 1

    async def sample() -> None:
        while not stop.is_set():
            sizes.append(len(await manager.get_bookmarks()))
            await asyncio.sleep(0.01)

    tasks = [asyncio.create_task(writer(n)) for n in range(WRITERS)]
    tasks.append(asyncio.create_task(sample()))
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    return {"median": statistics.median(sizes), "max": max(sizes), "samples": len(sizes)}


async def statement_cost(driver: neo4j.AsyncDriver, many: neo4j.Bookmarks,
                         one: neo4j.Bookmarks) -> dict[str, float]:
    variants = {"none": None, "one": one, f"{len(many.raw_values)}": many}
    blocks: dict[str, list[float]] = {name: [] for name in variants}
    for n in range(BLOCKS):
        for name in (list(variants) if n % 2 else list(reversed(variants))):
            times = []
            for i in range(PER_BLOCK):
                began = time.perf_counter()
                async with driver.session(bookmarks=variants[name]) as session:
                    result = await session.run(
                        "MATCH (p:BookmarkProbe {w: 0, i: $i}) RETURN p.i AS i", i=i % 20)
                    [record async for record in result]
                times.append(time.perf_counter() - began)
            blocks[name].append(statistics.median(times) * 1000)
    return {name: round(statistics.median(ms[2:]), 4) for name, ms in blocks.items()}


async def measure(neo) -> None:
    driver = neo4j.AsyncGraphDatabase.driver(neo.uri, auth=("neo4j", neo.resolve_password()))
    try:
        await driver.execute_query("CREATE INDEX probe IF NOT EXISTS "
                                   "FOR (p:BookmarkProbe) ON (p.w, p.i)")
        held = await held_under_load(driver)
        say(f"bookmarks held by the manager under {WRITERS} concurrent writers: "
            f"median {held['median']:g}, max {held['max']} ({held['samples']} samples)")
        kept = []
        for _ in range(round(held["median"])):
            async with driver.session() as session:
                await (await session.run("CREATE (:BookmarkProbe {w: -1})")).consume()
                kept.append(await session.last_bookmarks())
        many = neo4j.Bookmarks.from_raw_values([v for b in kept for v in b.raw_values])
        cost = await statement_cost(driver, many, kept[-1])
        say("one statement's round trip, ms (median of blocks of "
            f"{PER_BLOCK:,}, one connection): " + ", ".join(
                f"{name} bookmarks {ms}" for name, ms in cost.items()))
    finally:
        await driver.close()


def main() -> int:
    with fresh_neo4j("bookmarks", heap="512m", pagecache="256m") as neo:
        neo.start()
        asyncio.run(measure(neo))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
