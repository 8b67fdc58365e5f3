"""Neo4j's CPU a token by the form its create is sent in: `python -m bench.create_forms`.

On a fresh Neo4j of its own (a scratch directory, removed afterwards; heap 1g, page cache
512m) with the service's whole schema, the same tokens (a card with the benchmark's metadata,
random ciphertext and fingerprint; no audit event) are created in windows that alternate
between the forms, the order rotating each round:

- `create`: `tokens/create`, one statement a token, CREATE_FORMS_IN_FLIGHT (32) in flight;
- `transaction`: CREATE_FORMS_ROWS `tokens/create` statements in one explicit transaction, the
  same number of tokens in flight;
- `batch`: `tokens/create_many`, CREATE_FORMS_ROWS rows a statement, the same number of tokens
  in flight (what `tokens/create_batch` does for creates written together, less their events);
- `batch_events`: `tokens/create_batch` as creates written together send it, each row with its
  own write event (shaped as a create's, at its own place in one chain; a random MAC);
- `batch_events_listed`: the same statement with each row's event created whole, its
  properties listed in the CREATE, instead of created with its place and completed by
  `SET +=`: an alternative measured before building it (its text is made here).

CREATE_FORMS_FORMS names the forms to run (comma-separated; all unless set).

Each window creates CREATE_FORMS_TOKENS tokens; Neo4j's own CPU (its process's ticks) over the
window is divided by them. CREATE_FORMS_WARMUP rounds are discarded while the JIT settles,
then CREATE_FORMS_ROUNDS are kept. Reported per form: the median and every kept round.
Written to bench/results/create-forms-latest.json and a dated copy.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime

import orjson

from vaultgraph.audit.event import FIELDS, SOME_FIELDS, WRITE
from vaultgraph.audit.ids import COMPACT, ROUTES
from vaultgraph.repository.audit_form import DERIVED, MAC_END
from vaultgraph.repository.coalesce import row_event
from vaultgraph.services import expiry
from vaultgraph.services.audit_writer import new_chain_id

from .dataset import card_metadata
from .forms import alternate, env_int, neo4j_ms, run_alone, with_schema

TOKENS = env_int("CREATE_FORMS_TOKENS", 1600)
ROUNDS = env_int("CREATE_FORMS_ROUNDS", 6)
WARMUP = env_int("CREATE_FORMS_WARMUP", 14)
ROWS = env_int("CREATE_FORMS_ROWS", 8)
IN_FLIGHT = env_int("CREATE_FORMS_IN_FLIGHT", 32)
ONLY = [name for name in os.environ.get("CREATE_FORMS_FORMS", "").split(",") if name]

# Every property a write event's stored form can hold (audit/event.py FIELDS and SOME_FIELDS,
# each id split as audit/ids.py COMPACT splits it, the MAC in two halves), its place apart.
# (one token is held as the scalar `token_id`, several as the list; audit_form.py).
STORED = tuple(dict.fromkeys(
    n for f in (*FIELDS, *SOME_FIELDS, "token_id", "mac", MAC_END)
    if f not in (*DERIVED, "at", "chain", "seq")
    for n in ((f, *COMPACT[f]) if f in COMPACT else (f,))))
SET_FORM = ("CREATE (audit_event:AuditEvent:WriteAuditEvent {chain: row.audit_chain, "
            "seq: row.audit_seq})\n  SET audit_event += row.audit, audit_event.at = row.audit_at")
LISTED_FORM = ("CREATE (audit_event:AuditEvent:WriteAuditEvent {chain: row.audit_chain, "
               "seq: row.audit_seq, at: row.audit_at, "
               + ", ".join(f"{name}: row.audit.{name}" for name in STORED) + "})")


def write_event(tenant_id: str, token_id: str, chain: str, seq: int) -> dict:
    """A create's write event at its place (a random MAC: what is stored, not what a signer
    would sign)."""
    return {"id": str(uuid.uuid4()), "at": datetime.now(UTC), "tenant_id": tenant_id,
            "application_id": tenant_id, "key_id": tenant_id, "operation": "token:create",
            "route": ROUTES[1], "token_ids": [token_id], "outcome": "success", "status": 201,
            "transform": "mask", "transform_counts": None, "trace_id": uuid.uuid4().hex,
            "client_ip": "127.0.0.1", "user_agent": "bench", "reason": None, "chain": chain,
            "seq": seq, "prev": None, "key_version": 1, "kind": WRITE,
            "mac": os.urandom(32).hex()}


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


async def measure(neo) -> dict[str, list[float]]:
    db, catalog = await with_schema(neo)
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

    batch_text = catalog.text("tokens/create_batch")
    if SET_FORM not in batch_text:
        raise RuntimeError("tokens/create_batch no longer creates its events as this measures")
    listed_text = batch_text.replace(SET_FORM, LISTED_FORM)
    chain, seq = new_chain_id(), [0]

    def with_event(i: int) -> dict:
        r = row()
        seq[0] += 1
        return {**r, "index": i, **row_event(write_event(tenant, r["id"], chain, seq[0]))}

    async def batch_events(text: str = batch_text) -> None:
        rows = [with_event(i) for i in range(ROWS)]  # no parent: plain creates written together
        await db.driver.execute_query(text, {**shared, "parent_prefixes": [], "rows": rows},
                                      database_="neo4j")

    async def batch_events_listed() -> None:
        await batch_events(listed_text)

    # form: (one operation, tokens it creates, operations in flight)
    forms = {"create": (one, 1, IN_FLIGHT), "transaction": (transaction, ROWS, IN_FLIGHT // ROWS),
             "batch": (batch, ROWS, IN_FLIGHT // ROWS),
             "batch_events": (batch_events, ROWS, IN_FLIGHT // ROWS),
             "batch_events_listed": (batch_events_listed, ROWS, IN_FLIGHT // ROWS)}
    forms = {name: form for name, form in forms.items() if not ONLY or name in ONLY}
    pid = neo.running_pid()

    async def window(name: str) -> float:
        op, per, in_flight = forms[name]
        return await neo4j_ms(pid, lambda _: op(), calls=TOKENS // per, in_flight=in_flight,
                              units=per)

    kept = await alternate(list(forms), window, warmup=WARMUP, rounds=ROUNDS)
    await db.close()
    return kept


def main() -> None:
    run_alone("create-forms", measure,
              {"tokens": TOKENS, "rounds": ROUNDS, "warmup": WARMUP, "rows": ROWS,
               "in_flight": IN_FLIGHT, "forms": ONLY or "all"}, "neo4j_ms_a_token", "a token")


if __name__ == "__main__":
    main()
