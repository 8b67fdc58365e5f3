"""What the measurements of alternatives on a fresh Neo4j of their own share
(bench/create_forms.py, bench/event_cost.py): the store with the service's whole schema,
windows of each form in turn, and the run itself, its figures written to bench/results."""

from __future__ import annotations

import asyncio
import os
import statistics
from collections.abc import Awaitable, Callable

from vaultgraph.catalog import Catalog

from . import cpu
from .audit_storage import _connect, fresh_neo4j
from .environment import say
from .run import provenance, write_results


def env_int(name: str, default: int) -> int:
    """A whole-number setting from the environment (unset or empty: `default`)."""
    return int(os.environ.get(name) or default)


async def neo4j_ms(pid: int, op: Callable[[int], Awaitable[object]], *, calls: int,
                   in_flight: int, units: int) -> float:
    """Neo4j's CPU (ms, process `pid`) a unit while `calls` calls of `op(lane)` run over
    `in_flight` lanes at once, each call `units` units (a statement's events or tokens)."""
    todo = iter(range(calls))

    async def lane(n: int) -> None:
        for _ in todo:
            await op(n)

    before = cpu.own_ticks(pid)
    await asyncio.gather(*(lane(n) for n in range(max(1, in_flight))))
    return (cpu.own_ticks(pid) - before) * cpu.TICK_MS / (calls * units)


async def with_schema(neo):
    """A connection to `neo` once the service's whole schema is in place and online, and the
    catalog."""
    db = await _connect(neo)
    catalog = Catalog.load()
    for statement in catalog.schema_statements():
        await db.driver.execute_query(statement, database_="neo4j")
    await db.driver.execute_query("CALL db.awaitIndexes(300)", database_="neo4j")
    return db, catalog


async def alternate(names: list[str], window: Callable[[str], Awaitable[float]], *,
                    warmup: int, rounds: int) -> dict[str, list[float]]:
    """`window(name)` of each form in turn, the order rotating each round, for `warmup`
    discarded rounds (the JIT settling) and `rounds` kept: each form's kept figures (ms)."""
    kept: dict[str, list[float]] = {name: [] for name in names}
    for n in range(warmup + rounds):
        order = names[n % len(names):] + names[:n % len(names)]
        got = {name: await window(name) for name in order}
        if n >= warmup:
            for name, value in got.items():
                kept[name].append(round(value, 4))
        say(f"round {n + 1}/{warmup + rounds}{' (warm-up)' if n < warmup else ''}: "
            + ", ".join(f"{name} {value:.3f} ms" for name, value in got.items()))
    return kept


def run_alone(name: str, measure: Callable[..., Awaitable[dict[str, list[float]]]],
              settings: dict, key: str, unit: str) -> None:
    """`measure(neo)` on a fresh Neo4j `name` of its own (heap 1g, page cache 512m): each
    form's median (as `key`) and kept rounds, said (ms `unit`) and written to
    bench/results/<name>-latest.json and a dated copy."""
    with fresh_neo4j(name, heap="1g", pagecache="512m") as neo:
        neo.start()
        kept = asyncio.run(measure(neo))
    forms = {form: {key: statistics.median(values), "rounds": values}
             for form, values in kept.items()}
    result = {**provenance(), "settings": settings, "forms": forms}
    for form, figures in forms.items():
        say(f"{form:12s} Neo4j {figures[key]:.3f} ms {unit}")
    say(f"written to {write_results(result, name + '-')}")
