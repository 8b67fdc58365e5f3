"""What a side's own process reports about a measured window, from the service's metrics —
scraped from its metrics listener on the service side, read from this process's registry on
the bare side, which runs the same monitor and audit writer: what held it up (its event loop
running late, Python's garbage collections, slow audit group commits, which every read in the
batch waits for: `vaultgraph/stall_monitor.py`, `vaultgraph_audit_commit_seconds`) and its audit
events per group commit. (Whether Neo4j's JVM stopped: bench/neo4j_log.py.)"""

from __future__ import annotations

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

LAG = "vaultgraph_event_loop_lag_seconds"
GC = "vaultgraph_python_gc_pause_seconds"
COMMIT = "vaultgraph_audit_commit_seconds"
BATCHES, EVENTS = "vaultgraph_audit_batches_total", "vaultgraph_audit_events_total"
LATE, VERY_LATE, LONG_GC = "0.05", "0.25", "0.025"  # histogram bucket bounds (seconds)


def _key(name: str, labels: dict) -> str:
    return name + "".join(f"|{k}={v}" for k, v in sorted(labels.items()))


def _wanted(name: str) -> bool:
    return name.startswith((LAG, GC, COMMIT)) or name in (BATCHES, EVENTS)


def from_exposition(text: str) -> dict[str, float]:
    """The samples the bench reads from a `/metrics` text: {name|label=value...: value}."""
    return {_key(s.name, s.labels): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples if _wanted(s.name)}


def from_registry() -> dict[str, float]:
    """The same samples from this process's own registry (the bare side)."""
    return {_key(s.name, s.labels): s.value
            for family in REGISTRY.collect() for s in family.samples if _wanted(s.name)}


def batch_mean(before: dict[str, float], after: dict[str, float]) -> float | None:
    """Audit events per group commit between two readings."""
    batches = after.get(BATCHES, 0.0) - before.get(BATCHES, 0.0)
    events = after.get(EVENTS, 0.0) - before.get(EVENTS, 0.0)
    return round(events / batches, 1) if batches else None


def between(before: dict[str, float], after: dict[str, float]) -> dict:
    """What changed between two readings: loop lags over 50 and 250 ms, and collections (how
    many, their total milliseconds, how many over 25 ms)."""
    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    def over(name: str, bound: str, **labels: str) -> int:
        return round(delta(_key(f"{name}_count", labels))
                     - delta(_key(f"{name}_bucket", {**labels, "le": bound})))

    generations = sorted({dict(part.split("=", 1) for part in key.split("|")[1:])["generation"]
                          for key in after if key.startswith(f"{GC}_count|")})
    by_generation = {g: {"pauses": round(delta(_key(f"{GC}_count", {"generation": g}))),
                         "ms": round(1000 * delta(_key(f"{GC}_sum", {"generation": g})), 1)}
                     for g in generations}
    return {
        "loop_ticks": round(delta(_key(f"{LAG}_count", {}))),
        "loop_late_over_50ms": over(LAG, LATE),
        "loop_late_over_250ms": over(LAG, VERY_LATE),
        "gc_pauses": sum(g["pauses"] for g in by_generation.values()),
        "gc_ms": round(sum(g["ms"] for g in by_generation.values()), 1),
        "gc_over_25ms": sum(over(GC, LONG_GC, generation=g) for g in generations),
        "audit_commits": round(delta(_key(f"{COMMIT}_count", {}))),
        "audit_commits_over_50ms": over(COMMIT, LATE),
        # How long a group commit took on average (what every read in its batch waited for
        # after the batch closed).
        "audit_commit_mean_ms": (round(1000 * delta(_key(f"{COMMIT}_sum", {}))
                                       / delta(_key(f"{COMMIT}_count", {})), 2)
                                 if delta(_key(f"{COMMIT}_count", {})) else None),
        "gc_by_generation": by_generation,
    }


def describe(stalls: dict | None) -> str:
    """One phrase for the report when the process stalled: "event loop late over 50 ms 3
    times (1 over 250 ms); 2 collections over 25 ms (of 47, 310 ms in all)"."""
    if not stalls:
        return ""
    parts = []
    if late := stalls.get("loop_late_over_50ms"):
        worst = stalls.get("loop_late_over_250ms") or 0
        parts.append(f"event loop late over 50 ms {late} time{'s' if late != 1 else ''}"
                     + (f" ({worst} over 250 ms)" if worst else ""))
    if long_gc := stalls.get("gc_over_25ms"):
        parts.append(f"{long_gc} collection{'s' if long_gc != 1 else ''} over 25 ms (of "
                     f"{stalls.get('gc_pauses', 0)}, {stalls.get('gc_ms', 0):g} ms in all)")
    if slow := stalls.get("audit_commits_over_50ms"):
        parts.append(f"{slow} audit group commit{'s' if slow != 1 else ''} over 50 ms (of "
                     f"{stalls.get('audit_commits', 0)})")
    return "; ".join(parts)
