"""Neo4j's CPU for one read's audit event, and how much of it is the event's node itself:
`python -m bench.event_cost`.

On a fresh Neo4j of its own (a scratch directory, removed afterwards; heap 1g, page cache
512m) with the service's whole schema, events shaped as a masked get's (one token, every field
a get's event holds, a random MAC) are group-committed EVENT_COST_BATCH (32, about what the
record's get workload commits a batch) a statement, two statements in flight, in windows that
alternate between the forms, the order rotating each round:

- `write_batch`: `audit/write_batch`, as the audit writer sends it: the chain's head locked
  and moved, each event created with its indexes;
- `node`: the same events' nodes with the same properties, created by the same FOREACH under
  a label that no index or constraint names, and nothing else: what the node alone costs;
- `packed`: `audit/write_batch` with each event holding as properties only what an index or
  the chain's verification reads (`INDEXED`), every other field packed into one byte string:
  the cheapest an event with fewer properties could be, measured before building it;
- `blob`: a node under that label holding the whole event as one byte string and nothing else:
  an event's fields at their cheapest, with nothing any index or check could read;
- `empty`: a node under that label with no property, the same parameters sent as `node`'s: what
  the node itself costs, and the statement and its parameters around it;
- `bare`: as `empty`, with no parameters (the nodes counted by `range`): whether sending and
  decoding an event's parameters costs anything beside;
- `one_node`: the statement's events together in one node under that label, as one byte
  string: what an event costs when a group commit's events share a node, with no index.

`blob`, `empty` and `bare` bound what any form that keeps one node an event could cost.

Each window writes EVENT_COST_EVENTS events; Neo4j's own CPU (its process's ticks) over the
window is divided by them. EVENT_COST_WARMUP rounds are discarded while the JIT settles, then
EVENT_COST_ROUNDS are kept. Reported per form: the median and every kept round. Written to
bench/results/event-cost-latest.json and a dated copy.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime

import orjson

from vaultgraph.audit.ids import ROUTES
from vaultgraph.repository.audit_form import created_parts
from vaultgraph.services.audit_writer import new_chain_id

from .forms import alternate, env_int, neo4j_ms, run_alone, with_schema

EVENTS = env_int("EVENT_COST_EVENTS", 6400)
BATCH = env_int("EVENT_COST_BATCH", 32)
ROUNDS = env_int("EVENT_COST_ROUNDS", 8)
WARMUP = env_int("EVENT_COST_WARMUP", 10)
IN_FLIGHT = 2

# What an index (cypher/schema/003_audit.cypher) or the chain's verification reads.
INDEXED = ("tenant_key", "application_key", "operation", "outcome", "token_key", "chain", "seq",
           "mac", "mac_end")
NODE_ONLY = ("FOREACH (ev IN $created | CREATE (e:BenchEventCost) "
             "SET e = ev.fields, e.at = ev.at)")
BLOB_ONLY = "FOREACH (b IN $blobs | CREATE (e:BenchEventCost {b: b}))"
EMPTY = "FOREACH (ev IN $created | CREATE (e:BenchEventCost))"
BARE = "UNWIND range(1, $n) AS i CREATE (e:BenchEventCost)"
ONE_NODE = "CREATE (e:BenchEventCost {b: $blob})"


def read_event(tenant: str, app: str, chain: str, seq: int) -> dict:
    """An event as a masked get's is signed (a random MAC: what is stored, not what a signer
    would sign)."""
    return {"id": str(uuid.uuid4()), "at": datetime.now(UTC), "tenant_id": tenant,
            "application_id": app, "key_id": app, "operation": "token:read",
            "route": ROUTES[3], "token_ids": [str(uuid.uuid4())], "outcome": "success",
            "status": 200, "transform": "mask", "transform_counts": None,
            "trace_id": uuid.uuid4().hex, "client_ip": "127.0.0.1", "user_agent": "bench",
            "reason": None, "chain": chain, "seq": seq, "prev": os.urandom(32).hex(),
            "key_version": 1, "mac": os.urandom(32).hex()}


def plain(fields: dict, names=None) -> dict:
    """`fields` (those of `names`, or all) as JSON takes them: bytes as hex."""
    return {k: v.hex() if isinstance(v, bytes) else v for k, v in fields.items()
            if names is None or k in names}


def packed(fields: dict, names=None) -> bytes:
    """`fields` (those of `names`, or all) as one byte string."""
    return orjson.dumps(plain(fields, names))


def packed_fields(fields: dict) -> dict:
    """`fields` with every one no index or verification reads packed into one byte string."""
    return {**{k: v for k, v in fields.items() if k in INDEXED},
            "packed": packed(fields, [k for k in fields if k not in INDEXED])}


async def measure(neo) -> dict[str, list[float]]:
    db, catalog = await with_schema(neo)
    tenant, app = str(uuid.uuid4()), str(uuid.uuid4())
    write_batch = catalog.text("audit/write_batch")
    # One chain a statement in flight, as the writer's lanes each write their own; their ids
    # as the writer makes them (stored as integers).
    heads = {lane: [new_chain_id(), 0] for lane in range(IN_FLIGHT)}

    async def chained(lane: int, pack: bool = False) -> None:
        head = heads[lane]
        first = head[1]
        head[1] += BATCH
        created = [created_parts(read_event(tenant, app, head[0], first + i + 1))
                   for i in range(BATCH)]
        if pack:
            created = [{**c, "fields": packed_fields(c["fields"])} for c in created]
        records, _, _ = await db.driver.execute_query(
            write_batch, {"chain": head[0], "head_seq": head[1], "created": created,
                          "linked": [], "blocks": [], "placed": []}, database_="neo4j")
        if not records[0]["in_order"]:
            raise RuntimeError("the chain's head moved: the measurement is not of a batch")

    chain = new_chain_id()

    def unchained() -> list[dict]:
        return [created_parts(read_event(tenant, app, chain, 0)) for _ in range(BATCH)]

    async def statement(text: str, **params) -> None:
        await db.driver.execute_query(text, params, database_="neo4j")

    async def node(lane: int) -> None:
        await statement(NODE_ONLY, created=unchained())

    async def packed_form(lane: int) -> None:
        await chained(lane, pack=True)

    async def blob(lane: int) -> None:
        await statement(BLOB_ONLY, blobs=[packed(c["fields"]) for c in unchained()])

    async def empty(lane: int) -> None:
        await statement(EMPTY, created=unchained())

    async def bare(lane: int) -> None:
        await statement(BARE, n=BATCH)

    async def one_node(lane: int) -> None:
        await statement(ONE_NODE, blob=orjson.dumps([plain(c["fields"]) for c in unchained()]))

    forms = {"write_batch": chained, "node": node, "packed": packed_form, "blob": blob,
             "empty": empty, "bare": bare, "one_node": one_node}
    pid = neo.running_pid()

    async def window(name: str) -> float:
        return await neo4j_ms(pid, forms[name], calls=EVENTS // BATCH, in_flight=IN_FLIGHT,
                              units=BATCH)

    kept = await alternate(list(forms), window, warmup=WARMUP, rounds=ROUNDS)
    await db.close()
    return kept


def main() -> None:
    run_alone("event-cost", measure,
              {"events": EVENTS, "batch": BATCH, "rounds": ROUNDS, "warmup": WARMUP,
               "in_flight": IN_FLIGHT}, "neo4j_ms_an_event", "an event")


if __name__ == "__main__":
    main()
