"""What each workload's statements cost inside Neo4j, whatever the machine's load: the bare
side's statements run under PROFILE, and their database hits, rows and costliest operators are
summed per request (`BENCH_PLANS=1`). Statements run inside a managed transaction (an update's
under the token's lock, when its token changed after it was read) are not profiled."""

from __future__ import annotations

import random
import uuid
from collections import Counter

from .memory import hit_ratio
from .workloads import Context, Workload

REQUESTS = 20  # items per workload: enough to average over the data set's variety


def _walk(plan: dict, hits: Counter) -> tuple[int, int]:
    """(db hits, rows) of a profiled plan, each operator's hits added to `hits`."""
    op = plan.get("operatorType", "?").split("@")[0]
    own = int(plan.get("dbHits", 0))
    hits[op] += own
    total, rows = own, int(plan.get("rows", 0))
    for child in plan.get("children", []):
        total += _walk(child, hits)[0]
    return total, rows


async def profile_workload(w: Workload, ctx: Context) -> dict:
    rng = random.Random("plans-" + w.name)  # noqa: S311 - request variety
    ctx.plans = {}
    try:
        for item in w.items(ctx, rng)[:REQUESTS]:
            await w.bare(ctx, item)
        out = {}
        for name, plans in ctx.plans.items():
            ops: Counter = Counter()
            hits = rows = 0
            for plan in plans:
                h, r = _walk(plan, ops)
                hits, rows = hits + h, rows + r
            out[name] = {"per_request": round(len(plans) / REQUESTS, 2),
                         "db_hits": round(hits / len(plans), 1),
                         "rows": round(rows / len(plans), 1),
                         "top_operators": {op: round(n / len(plans), 1)
                                           for op, n in ops.most_common(3)}}
        return out
    finally:
        ctx.plans = None


async def page_cache(w: Workload, ctx: Context, requests: int = 200) -> dict:
    """Neo4j's page-cache hits and faults over `requests` of a read workload's bare statements,
    run in one transaction whose counters `SHOW TRANSACTIONS` reports (a PROFILE's per-operator
    page-cache columns stay at 0 on Community Edition)."""
    rng = random.Random("page-cache-" + w.name)  # noqa: S311 - request variety
    tag = str(uuid.uuid4())
    async with ctx.driver.session(database=ctx.database) as session:
        tx = await session.begin_transaction(metadata={"bench_page_cache": tag})
        ctx.tx = tx
        try:
            items = w.items(ctx, rng)
            for i in range(requests):
                await w.bare(ctx, items[i % len(items)])
            records, _, _ = await ctx.driver.execute_query(
                "SHOW TRANSACTIONS YIELD metaData, pageHits, pageFaults "
                "WHERE metaData.bench_page_cache = $tag RETURN pageHits, pageFaults",
                tag=tag, database_=ctx.database)
        finally:
            ctx.tx = None
            await tx.rollback()
    if not records or records[0]["pageHits"] is None:
        raise RuntimeError("SHOW TRANSACTIONS did not report the transaction's page cache use")
    return hit_ratio(records[0]["pageHits"], records[0]["pageFaults"] or 0)
