"""Memory and storage figures: the service's resident set (its workers summed), Neo4j's heap,
resident set and store size, its page cache's hit ratio over a workload's statements, and the
soak's leak verdict (`python -m bench --soak`)."""

from __future__ import annotations

from pathlib import Path

from . import cpu

MIB = 1024 * 1024

# The soak's verdict: the service's resident set may settle, not climb. Allowed between the
# first and the last quarter of the soak (after its warm-up): this much, or this share.
SOAK_ALLOWED_MIB = 8.0
SOAK_ALLOWED_SHARE = 0.03


def rss_bytes(pid: int) -> int:
    """Resident set of one process (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss_bytes(root: int | None) -> int:
    """Resident set of a process and every process under it (a service and its workers)."""
    if root is None:
        return 0
    return sum(rss_bytes(pid) for pid in cpu.process_tree(root))


def mib(n: float) -> float:
    return round(n / MIB, 1)


def store_bytes(neo4j_home: Path) -> dict:
    """Bytes on disk of the `neo4j` database's store files and of its transaction logs."""
    data = neo4j_home / "data"
    return {"store": _size(data / "databases" / "neo4j"),
            "transaction_logs": _size(data / "transactions" / "neo4j")}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


async def neo4j_heap(driver, database: str) -> dict:
    """Neo4j's heap (JMX `java.lang:type=Memory`): used, committed and the configured maximum.
    Its page cache lives outside the heap; its use shows in the process's resident set."""
    records, _, _ = await driver.execute_query(
        "CALL dbms.queryJmx('java.lang:type=Memory') YIELD attributes "
        "RETURN attributes.HeapMemoryUsage.value.properties AS heap", database_=database)
    heap = records[0]["heap"] if records else {}
    return {k: mib(heap[k]) for k in ("used", "committed", "max") if k in heap}


def hit_ratio(hits: int, faults: int) -> dict:
    total = hits + faults
    return {"hits": hits, "faults": faults,
            "hit_ratio": round(hits / total, 4) if total else None}


def soak_verdict(samples: list[dict]) -> dict:
    """Did the resident set climb? The first quarter of the samples is the warm-up; the mean of
    the second quarter is compared with the mean of the last quarter."""
    rss = [s["service_rss_mib"] for s in samples]
    if len(rss) < 8:
        return {"grew": None, "why": "too few samples (at least 8)"}
    q = len(rss) // 4
    early = sum(rss[q:2 * q]) / q
    late = sum(rss[-q:]) / q
    allowed = max(SOAK_ALLOWED_MIB, early * SOAK_ALLOWED_SHARE)
    return {"early_mib": round(early, 1), "late_mib": round(late, 1),
            "growth_mib": round(late - early, 1), "allowed_mib": round(allowed, 1),
            "grew": late - early > allowed}
