"""What an audit event costs (docs/audit.md, "Store"): on disk, and in Neo4j's CPU. Writes events
shaped like the service's through the real AuditWriter into a fresh Neo4j of its own — first a
warm-up (the JVM compiles the write path), then the measured events, `BENCH_AUDIT_CONCURRENCY`
requests at a time as the middleware hands them over (so batches are the size the benchmark's 32
connections make) — checkpoints, and divides the store's growth, Neo4j's CPU time (from /proc,
its JIT compiler threads apart) and this writer process's (the events' MACs and the driver) by
the number of events. The store's growth is also given per store file and per index
(`bytes_per_event_by_file`), so a change to the model shows where its bytes went.

    .venv/bin/python -m bench.audit_storage            # 100,000 events
    BENCH_AUDIT_EVENTS=20000 .venv/bin/python -m bench.audit_storage
    BENCH_AUDIT_EVENTS=20000 BENCH_AUDIT_WARMUP=10000 .venv/bin/python -m bench.audit_storage

`BENCH_AUDIT_WITHOUT=key_id,user_agent` writes the events without those fields (null, so not
stored): what they take of the store, the property records' packing included.
`BENCH_AUDIT_TOKENS=50` writes a list page's event instead of a get's: one naming 50 tokens
(an event naming several has an `AUDIT_REF` per token, docs/audit.md "Cost and growth").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import REGISTRY

from vaultgraph.catalog import Catalog
from vaultgraph.crypto import KeyRing
from vaultgraph.neo4j_local import LocalNeo4j
from vaultgraph.repository.audit import AuditRepository
from vaultgraph.repository.database import Database
from vaultgraph.services.audit_writer import AuditWriter
from vaultgraph.settings import PROJECT_ROOT, Settings

from . import cpu
from .environment import new_kek, say


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _sizes(path: Path, indexes: dict[str, str]) -> dict[str, int]:
    """Each store file's size, and each index's (its directory's files together, under the
    index's name): where an event's bytes go."""
    out: dict[str, int] = {}
    for p in path.rglob("*"):
        if p.is_file():
            rel = p.relative_to(path)
            name = (f"index {indexes.get(rel.parts[3], rel.parts[3])}"
                    if rel.parts[0] == "schema" and len(rel.parts) > 4 else str(rel))
            out[name] = out.get(name, 0) + p.stat().st_size
    return out


WITHOUT = tuple(f for f in os.environ.get("BENCH_AUDIT_WITHOUT", "").split(",") if f)


def _tokens() -> int:
    tokens = int(os.environ.get("BENCH_AUDIT_TOKENS", "1"))
    if tokens < 1:
        raise SystemExit("BENCH_AUDIT_TOKENS must be at least 1")
    return tokens


def _event(tenant: str, application: str, key: str, tokens: int = 1) -> dict:
    """A get's event as the audit middleware writes it: one token, masked, a browser-sized
    user agent (less the fields of `BENCH_AUDIT_WITHOUT`); `tokens` > 1, a list page's, naming
    that many tokens, all masked."""
    page = tokens > 1
    return _without({
        "id": str(uuid.uuid4()), "at": datetime.now(UTC), "tenant_id": tenant,
        "application_id": application, "key_id": key, "operation": "token:read",
        "route": "GET /tokens" if page else "GET /tokens/{id}",
        "token_ids": [str(uuid.uuid4()) for _ in range(tokens)], "outcome": "success",
        "status": 200, "transform": "mask", "transform_counts": None,
        "trace_id": uuid.uuid4().hex, "client_ip": "10.0.12.34",
        "user_agent": "python-httpx/0.28.1", "reason": None,
    })


def _without(event: dict) -> dict:
    return {**event, **dict.fromkeys(WITHOUT)} if WITHOUT else event


async def _connect(neo: LocalNeo4j) -> Database:
    # A generous deadline: on a loaded machine the cold server's first plans take seconds, and
    # a batch past the deadline fails its requests (this measures sizes, not latency).
    return Database.connect(neo.uri, "neo4j", neo.resolve_password(),
                            Catalog.load(PROJECT_ROOT / "cypher"), "neo4j", timeout=120.0)


async def schema(neo: LocalNeo4j) -> dict[str, str]:
    """Apply the schema; each index's directory number and its name."""
    db = await _connect(neo)
    try:
        await db.apply_schema()
        records, _, _ = await db.driver.execute_query("SHOW INDEXES YIELD id, name",
                                                      database_="neo4j")
        return {str(r["id"]): r["name"] for r in records}
    finally:
        await db.close()


async def _requests(writer: AuditWriter, events: int, concurrency: int, label: str,
                    tokens: int) -> None:
    """`concurrency` requests at a time, each announcing itself and recording its event, until
    `events` are committed."""
    tenant, application, key = (str(uuid.uuid4()) for _ in range(3))
    todo = iter(range(events))

    async def one_connection() -> None:
        for n in todo:
            with writer.arriving() as arrival:
                await writer.record(_event(tenant, application, key, tokens), arrival)
            if n % 20_000 == 19_999:
                say(f"{label}: {n + 1:,} / {events:,} events")

    await asyncio.gather(*(one_connection() for _ in range(concurrency)))


async def write(neo: LocalNeo4j, events: int, warmup: int, concurrency: int,
                tokens: int = 1) -> dict:
    db = await _connect(neo)
    try:
        defaults = Settings()
        writer = AuditWriter.from_settings(AuditRepository(db), KeyRing.from_spec(new_kek()),
                                           defaults)
        await _requests(writer, warmup, concurrency, "warm-up", tokens)
        groups = {"neo4j": neo.running_pid(), "writer": os.getpid()}
        before, began = cpu.snapshot(groups), time.monotonic()
        threads_before, batches_before = cpu.threads(neo.running_pid()), _batches()
        await _requests(writer, events, concurrency, "measured", tokens)
        seconds, spent = time.monotonic() - began, cpu.per_request(before, cpu.snapshot(groups),
                                                                    events)
        jit = cpu.per_request({}, cpu.threads(neo.running_pid()).since(threads_before), events)
        batches = _batches() - batches_before
        await writer.stop()
        return {"write_seconds": round(seconds, 1),
                "events_per_second_one_writer": round(events / seconds),
                "events_per_batch": round(events / batches, 1) if batches else None,
                "neo4j_cpu_ms_per_event": spent["neo4j"],
                "neo4j_jit_cpu_ms_per_event": jit["jit"],
                "writer_cpu_ms_per_event": spent["writer"]}
    finally:
        await db.close()


def _batches() -> float:
    """Group commits so far in this process (the writer's own counter)."""
    return REGISTRY.get_sample_value("vaultgraph_audit_batches_total") or 0.0


@contextlib.contextmanager
def fresh_neo4j(name: str, *, heap: str, pagecache: str) -> Iterator[LocalNeo4j]:
    """A Neo4j of the measurement's own, in a scratch directory removed afterwards (stopped
    on the way out; the caller starts it, and may stop and start it in between)."""
    home = Path(tempfile.mkdtemp(prefix=f"vaultgraph-{name}-"))
    lib = Settings.from_env().home_path / "neo4j-lib"
    neo = LocalNeo4j(home=home / "neo4j", lib_dir=lib, bolt_port=_port(), http_port=_port(),
                     password=name, heap=heap, pagecache=pagecache)
    try:
        yield neo
    finally:
        neo.stop()
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    events = int(os.environ.get("BENCH_AUDIT_EVENTS", "100000"))
    warmup = int(os.environ.get("BENCH_AUDIT_WARMUP", "60000"))
    concurrency = int(os.environ.get("BENCH_AUDIT_CONCURRENCY", "32"))
    tokens = _tokens()
    # Community Neo4j has no db.checkpoint(): a clean stop checkpoints the store, so each size
    # is taken with the server stopped.
    with fresh_neo4j("audit-storage", heap="512m", pagecache="256m") as neo:
        store = neo.home / "data" / "databases" / "neo4j"
        neo.start()
        indexes = asyncio.run(schema(neo))
        neo.stop()
        before, files_before = _size(store), _sizes(store, indexes)
        neo.start()
        # The warm-up's events are in the store too: sizes are taken around all of them.
        result = asyncio.run(write(neo, events, warmup, concurrency, tokens))
        neo.stop()
        after, files_after = _size(store), _sizes(store, indexes)
    result.update(events=events, warmup_events=warmup, concurrency=concurrency,
                  without=list(WITHOUT), tokens_per_event=tokens,
                  store_bytes_before=before, store_bytes_after=after,
                  bytes_per_event=round((after - before) / (events + warmup), 1))
    growth = {name: round((size - files_before.get(name, 0)) / (events + warmup), 1)
              for name, size in sorted(files_after.items())}
    result["bytes_per_event_by_file"] = {k: v for k, v in growth.items() if v}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
