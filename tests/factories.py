"""Test factories shared by every test module: applications with chosen permissions and rules.

    app = await make_application(client, admin_headers, permissions=["token:read"],
                                 rules=[{"container": "/pci/", "transform": "mask",
                                         "permissions": ["token:read"]}])
    await client.get("/tokens/abc", headers=key_headers(app))
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from vaultgraph.api.typedefs import services_key
from vaultgraph.audit.chain import sign
from vaultgraph.audit.ids import query_ids
from vaultgraph.auth.apikeys import HEADER
from vaultgraph.auth.permissions import TOKEN_PERMISSIONS
from vaultgraph.neo4j_local import LocalNeo4j
from vaultgraph.repository.audit import MAC_END, event_of, stored_form
from vaultgraph.repository.audit_prefix import AUDIT_HERE
from vaultgraph.repository.records import at_number
from vaultgraph.settings import Settings

T = TypeVar("T")

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def without_ids(text: str | bytes) -> str:
    """`text` with every UUID cut out. A random id holds any four digits now and then (about
    one in 4,000 holds "4242"), so a check that a secret's last digits are absent reads the rest."""
    return _UUID.sub("<id>", text.decode("utf-8", "replace") if isinstance(text, bytes) else text)


async def make_application(client, admin_headers, *, permissions: Iterable[str] = TOKEN_PERMISSIONS,
                           rules: list[dict] | None = None, name: str = "app") -> dict:
    """POST /applications as the tenant administrator; the JSON answer, including its `key`."""
    body: dict = {"name": name, "permissions": list(permissions)}
    if rules is not None:
        body["rules"] = rules
    resp = await client.post("/applications", json=body, headers=admin_headers)
    created = await resp.json()
    assert resp.status == 201, created
    return created


def key_headers(app_json: dict) -> dict[str, str]:
    """The headers that authenticate as the application `make_application` returned."""
    return {HEADER: app_json["key"]}


async def new_tenant(app, name: str = "test"):
    """A new tenant with its administrator key (every permission, reveal on `/`)."""
    return await app[services_key].tenants.create(name)


def database(app):
    """The app's own `Database` (the real Neo4j), for reading stored state directly."""
    return app[services_key].database


async def blocked_behind(app, held: Sequence[tuple[str, dict[str, Any]]],
                         request: Awaitable[T], *, statement: str, within: float = 10.0) -> T:
    """The answer of `request`, forced to wait for a concurrent write that commits meanwhile.

    The `held` statements (text, parameters) run in an explicit transaction of the test's own
    that stays open, holding their write locks; `request` starts, and once a transaction
    running the catalog statement `statement` shows as blocked (SHOW TRANSACTIONS), the held
    one commits and the request is let finish. This is the interleaving a race gives by
    chance: the request read its nodes before the other write committed, and takes their locks
    after it. A request that never blocks fails the test (it would prove nothing)."""
    db = database(app)
    # The statement as sent holds its text, or (its audit prefix placed inside it) the text
    # up to where the prefix goes.
    text = db.catalog.text(statement).partition(AUDIT_HERE)[0]
    async with db.driver.session(database=db.database) as session:
        tx = await session.begin_transaction()
        task: asyncio.Future[T] | None = None
        try:
            for query, params in held:
                await (await tx.run(query, params)).consume()
            task = asyncio.ensure_future(request)
            until = asyncio.get_running_loop().time() + within
            while not await blocked(db, text):
                assert not task.done(), f"the request did not wait for the held write: {task}"
                assert asyncio.get_running_loop().time() < until, f"{statement} never blocked"
                await asyncio.sleep(0.02)
            await tx.commit()
        except BaseException:
            if not tx.closed():
                await tx.rollback()
            if task is not None:
                task.cancel()
            raise
    return await task


async def blocked(db, text: str) -> int:
    """How many transactions running `text` (a statement's text, or part of it) wait on a
    lock now."""
    records, _, _ = await db.driver.execute_query(
        "SHOW TRANSACTIONS YIELD currentQuery, status "
        "WHERE status STARTS WITH 'Blocked' AND currentQuery CONTAINS $text "
        "RETURN count(*) AS n", {"text": text}, database_=db.database)
    return records[0]["n"]


async def wait_blocked(db, text: str, count: int = 1, within: float = 10.0) -> None:
    """Until `count` transactions running `text` wait on a lock; failing after `within` s."""
    until = asyncio.get_running_loop().time() + within
    while await blocked(db, text) < count:
        assert asyncio.get_running_loop().time() < until, f"never {count} blocked: {text[:60]}"
        await asyncio.sleep(0.02)


def held_delete(app, tenant_id: str, token_id: str, *, merged_into: str | None = None,
                actor: str = "racing-app") -> list[tuple[str, dict[str, Any]]]:
    """What a `DELETE /tokens/{id}` runs, or with `merged_into` what an update merging the token
    into another one runs (its links moved, then retired), for `blocked_behind` to hold."""
    catalog = database(app).catalog
    params = {"tenant_id": tenant_id, "id": token_id, "prefixes": ["/"], "actor": actor,
              "reason": "deleted" if merged_into is None else "deduplicated",
              "merged_into": merged_into}
    moves = [] if merged_into is None else [
        (catalog.text("tokens/move_edges"), {**params, "into": merged_into})]
    return [*moves, (catalog.text("tokens/delete"), params)]


def free_port() -> int:
    """A loopback port nobody listens on now (so two suites on one machine never collide)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PRIVATE_PASSWORD = "private-neo4j-password"


@contextlib.contextmanager
def private_neo4j(home: Path) -> Iterator[LocalNeo4j]:
    """A second real Neo4j of the test's own (under `home`), so stopping it disturbs no other
    test; it shares the suite's downloaded Neo4j jars."""
    lib = Settings.from_env().home_path / "neo4j-lib"
    neo = LocalNeo4j(home=home / "neo4j", lib_dir=lib, bolt_port=free_port(),
                     http_port=free_port(), password=PRIVATE_PASSWORD, heap="256m",
                     pagecache="32m")
    neo.start()
    try:
        yield neo
    finally:
        neo.stop()
        shutil.rmtree(home, ignore_errors=True)


def service_env(settings) -> dict[str, str]:
    """The environment of a `vaultgraph serve` subprocess (vaultgraph.testing.service) on this
    run's Neo4j, with the run's key-encryption key, no background sweeps and no webhook sender."""
    return {
        "PATH": "/usr/bin:/bin",
        "VAULTGRAPH_NEO4J_URI": settings.neo4j_uri,
        "VAULTGRAPH_NEO4J_USER": settings.neo4j_user,
        "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password(),
        "VAULTGRAPH_NEO4J_DATABASE": settings.neo4j_database,
        "VAULTGRAPH_KEK": settings.kek,
        "VAULTGRAPH_SHARED_DATABASE": "true",  # other tests' tenants, under their own keys
        "VAULTGRAPH_CYPHER_DIR": settings.cypher_dir,
        "VAULTGRAPH_LOG_LEVEL": "WARNING",
        "VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "0",
        # No webhook sender: it would claim other tests' deliveries (any tenant's).
        "VAULTGRAPH_WEBHOOK_POLL_INTERVAL": "0",
    }


def children_of(pid: int) -> list[int]:
    """The direct child processes of `pid` (a `vaultgraph serve` supervisor's workers)."""
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def retime_chain(services, chain: str, at: Callable[[dict], datetime], *,
                       placed: bool = True) -> None:
    """A chain (with no checkpoint yet) as if its events had been made at the times `at` gives
    each, and signed so by its writer: old events to prune, or link order and time order apart.
    Not `placed`: signed as a writer signed before placed chains (audit/chain.py), each after
    the MAC before it, and the chain no longer marked placed."""
    audit_log = services.audit_log
    events = [e async for e in audit_log._repo.chain_events(chain)]
    prev = ""
    for event in events:
        event["at"] = at(event)
        if not placed:
            event["prev"] = prev
        event["mac"] = prev = sign(audit_log._ring, event)
    db = services.database
    if not placed:
        await db.driver.execute_query("MATCH (c:AuditChain {id: $chain}) REMOVE c.placed",
                                      {"chain": chain}, database_=db.database)
    # Stored as the writer stores an event (the MAC as two halves of bytes, the time as an
    # integer; the AUDIT_REFs hold the time too).
    await db.driver.execute_query(
        "UNWIND $rows AS r MATCH (e:AuditEvent {id: r.id}) "
        "SET e.at = r.at, e.mac = r.mac, e.mac_end = r.mac_end "
        "WITH e OPTIONAL MATCH (e)-[ref:AUDIT_REF]->(e) SET ref.at = e.at",
        {"rows": [{"id": e["id"], "at": at_number(e["at"]),
                   **{k: v for k, v in stored_form(e).items() if k in ("mac", MAC_END)}}
                  for e in events]},
        database_=db.database)


# Audit events hold a UUID tenant's (application's, token's) id as two integers
# (vaultgraph/audit/ids.py): a test matches its tenant's events with
# `MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr})` and these parameters, and reads
# the tokens an event names from its properties as the service does.
def audit_tenant(tenant_id: str) -> dict[str, int | None]:
    parts = query_ids(tenant_id=tenant_id)
    return {"tk": parts["tenant_key"], "tr": parts["tenant_rest"]}


def audit_tokens(props) -> list[str]:
    return event_of(props)["token_ids"]
