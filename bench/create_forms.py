"""Neo4j's CPU a token by the form its create is sent in: `python -m bench.create_forms`.

On a fresh Neo4j of its own (a scratch directory, removed afterwards; heap 1g, page cache
512m) with the service's whole schema, the same tokens (a card with the benchmark's metadata,
random ciphertext and fingerprint; no audit event) are created in windows that alternate
between the forms, the order rotating each round:

- `create`: `tokens/create`, one statement a token, CREATE_FORMS_IN_FLIGHT (32) in flight;
- `transaction`: CREATE_FORMS_ROWS `tokens/create` statements in one explicit transaction, the
  same number of tokens in flight;
- `batch`: `tokens/create_many`, CREATE_FORMS_ROWS rows a statement, the same number of tokens
  in flight (what `tokens/create_batch` does for creates written together, less their events).

Each window creates CREATE_FORMS_TOKENS tokens; Neo4j's own CPU (its process's ticks) over the
window is divided by them. CREATE_FORMS_WARMUP rounds are discarded while the JIT settles,
then CREATE_FORMS_ROUNDS are kept. Reported per form: the median and every kept round.
Written to bench/results/create-forms-latest.json and a dated copy.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import uuid

import orjson

from vaultgraph.catalog import Catalog
from vaultgraph.services import expiry

from . import cpu
from .audit_storage import _connect, fresh_neo4j
from .dataset import card_metadata
from .environment import say
from .run import provenance, write_results


def _env(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


TOKENS = _env("CREATE_FORMS_TOKENS", 1600)
ROUNDS = _env("CREATE_FORMS_ROUNDS", 6)
WARMUP = _env("CREATE_FORMS_WARMUP", 14)
ROWS = _env("CREATE_FORMS_ROWS", 8)
IN_FLIGHT = _env("CREATE_FORMS_IN_FLIGHT", 32)


def new_row(n: int, tenant_id: str) -> dict:
    metadata = card_metadata(n)
    props = {"type": "card", "data_ct": os.urandom(120), "mask_ct": None,
             "fingerprint": os.urandom(32).hex(), "fingerprint_expression": "{{ data.number }}",
             "containers": ["/"], "metadata": orjson.dumps(metadata).decode(),
             "search_indexes": [], "search_index_values": [], "deduplicate_token": False,
             "created_by": "bench"}
    return {"index": 0, "tenant_id": tenant_id, "id": str(uuid.uuid4()), "props": props,
            "expires_at": None, "meta_kvs": [f"{k}\x1f{v}" for k, v in metadata.items()],
            "dedup": False, "index_digests": []}


async def measure(neo) -> dict:
    db = await _connect(neo)
    catalog = Catalog.load()
    for statement in catalog.schema_statements():
        await db.driver.execute_query(statement, database_="neo4j")
    await db.driver.execute_query("CALL db.awaitIndexes(300)", database_="neo4j")
    tenant, made = str(uuid.uuid4()), [0]
    shared = {"expired_actor": expiry.ACTOR, "expired_reason": expiry.REASON}

    def row() -> dict:
        made[0] += 1
        return new_row(made[0], tenant)

    def alone(r: dict) -> dict:
        return {**shared, "tenant_id": tenant, "id": r["id"], "props": r["props"],
                "expires_at": None, "meta_kvs": r["meta_kvs"], "index_digests": [],
                "dedup": False, "parent_id": None, "parent_prefixes": []}

    async def one() -> None:
        await db.driver.execute_query(catalog.text("tokens/create"), alone(row()),
                                      database_="neo4j")

    async def transaction() -> None:
        async with db.driver.session(database="neo4j") as session:
            tx = await session.begin_transaction()
            for _ in range(ROWS):
                await (await tx.run(catalog.text("tokens/create"), alone(row()))).consume()
            await tx.commit()

    async def batch() -> None:
        rows = [{**row(), "index": i} for i in range(ROWS)]
        await db.driver.execute_query(catalog.text("tokens/create_many"),
                                      {**shared, "rows": rows}, database_="neo4j")

    # form: (one operation, tokens it creates, operations in flight)
    forms = {"create": (one, 1, IN_FLIGHT), "transaction": (transaction, ROWS, IN_FLIGHT // ROWS),
             "batch": (batch, ROWS, IN_FLIGHT // ROWS)}
    pid = neo.running_pid()

    async def window(name: str) -> float:
        op, per, in_flight = forms[name]
        todo = iter(range(TOKENS // per))

        async def worker() -> None:
            for _ in todo:
                await op()

        before = cpu.own_ticks(pid)
        await asyncio.gather(*(worker() for _ in range(max(1, in_flight))))
        return (cpu.own_ticks(pid) - before) * cpu.TICK_MS / (TOKENS // per * per)

    names, kept = list(forms), {name: [] for name in forms}
    for n in range(WARMUP + ROUNDS):
        order = names[n % len(names):] + names[:n % len(names)]
        got = {name: await window(name) for name in order}
        if n >= WARMUP:
            for name, value in got.items():
                kept[name].append(round(value, 4))
        say(f"round {n + 1}/{WARMUP + ROUNDS}{' (warm-up)' if n < WARMUP else ''}: "
            + ", ".join(f"{name} {value:.3f} ms" for name, value in got.items()))
    await db.close()
    return {name: {"neo4j_ms_a_token": statistics.median(values), "rounds": values}
            for name, values in kept.items()}


def main() -> None:
    with fresh_neo4j("create-forms", heap="1g", pagecache="512m") as neo:
        neo.start()
        forms = asyncio.run(measure(neo))
    result = {**provenance(), "settings": {"tokens": TOKENS, "rounds": ROUNDS, "warmup": WARMUP,
                                           "rows": ROWS, "in_flight": IN_FLIGHT},
              "forms": forms}
    for name, figures in forms.items():
        say(f"{name:12s} Neo4j {figures['neo4j_ms_a_token']:.3f} ms a token")
    say(f"written to {write_results(result, 'create-forms-')}")


if __name__ == "__main__":
    main()
