"""Latency statistics: percentiles by nearest rank, over latencies in seconds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending sequence; nan when it is empty."""
    if not sorted_values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError("q must be within 0..100")
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class Result:
    """One side (service or bare) of one workload."""

    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    # CPU milliseconds per request by process group (bench/cpu.py), when measured.
    cpu_ms: dict | None = None
    # Audit events per group commit over the window.
    audit_batch_mean: float | None = None
    # Neo4j transactions begun per request over the window (bench/run.py transaction_number).
    neo4j_tx: float | None = None
    # What Neo4j did in the background during the window (bench/neo4j_log.py): checkpoints,
    # discarded plans.
    neo4j_background: dict | None = None
    # What held up the side's own process: its event loop running late, Python's collections
    # (bench/stalls.py).
    stalls: dict | None = None

    @property
    def rps(self) -> float:
        return (self.requests - self.errors) / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict:
        out = asdict(self)
        out["rps"] = round(self.rps, 1)
        for k in ("p50_ms", "p99_ms", "p999_ms", "seconds"):
            out[k] = None if math.isnan(out[k]) else round(out[k], 3)
        return out

    @classmethod
    def from_latencies(cls, latencies: Sequence[float], errors: int, seconds: float) -> Result:
        """`latencies` in seconds, of the successful requests; `errors` failed besides them."""
        ordered = sorted(latencies)
        return cls(requests=len(ordered) + errors, errors=errors, seconds=seconds,
                   p50_ms=percentile(ordered, 50) * 1000,
                   p99_ms=percentile(ordered, 99) * 1000,
                   p999_ms=percentile(ordered, 99.9) * 1000)


def combined(results: Sequence[Result]) -> Result:
    """Several windows of one side as one: their requests, errors and seconds summed, CPU per
    request, events per batch and transactions per request weighted by each window's
    requests, and the median of the windows' percentiles (a window's latencies are not kept).
    What each window's processes were held up by stays with the window (`stalls`,
    `neo4j_background` are None here)."""
    if len(results) == 1:
        return results[0]
    requests = sum(r.requests for r in results)

    def weighted(values: list[tuple[int, float | None]], places: int = 3) -> float | None:
        known = [(n, v) for n, v in values if v is not None]
        total = sum(n for n, _ in known)
        return round(sum(n * v for n, v in known) / total, places) if total else None

    def median(values: list[float]) -> float:
        ordered = sorted(values)
        middle = len(ordered) // 2
        return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1]
                                                         + ordered[middle]) / 2

    groups = sorted({g for r in results for g in (r.cpu_ms or {})})
    cpu_ms = {g: weighted([(r.requests, (r.cpu_ms or {}).get(g)) for r in results])
              for g in groups} or None
    return Result(
        requests=requests, errors=sum(r.errors for r in results),
        seconds=sum(r.seconds for r in results),
        p50_ms=median([r.p50_ms for r in results]), p99_ms=median([r.p99_ms for r in results]),
        p999_ms=median([r.p999_ms for r in results]), cpu_ms=cpu_ms,
        audit_batch_mean=weighted([(r.requests, r.audit_batch_mean) for r in results], 1),
        neo4j_tx=weighted([(r.requests, r.neo4j_tx) for r in results]))


def ratio(service: Result | None, bare: Result | None) -> float | None:
    if service is None or bare is None or bare.rps <= 0:
        return None
    return round(service.rps / bare.rps, 3)


NEO4J_ADDED_TARGET_MS = 0.05  # Neo4j's CPU a request, the service's side less the bare side's


def added_cpu(service: Result | None, bare: Result | None, target_ms: float) -> dict | None:
    """What the service adds over the bare client doing the same work, per request: its own CPU
    less the bare client's and driver's (`added_cpu_ms`, against `target_ms`), and its Neo4j's
    less the bare side's Neo4j's (`neo4j_added_cpu_ms`), with two kinds of Neo4j's work set
    apart on both sides: its JIT compiler's, and its index sampling's. Neo4j samples an index
    once it has changed by a share since its last sample, on its own schedule, in whichever
    side's window is open (0.30 ms a request in both of a one-rate search's service windows,
    none in the bare side's, in record 15)."""
    svc = (service.cpu_ms if service else None) or {}
    own = (bare.cpu_ms if bare else None) or {}
    if svc.get("service") is None or own.get("client") is None:
        return None
    out = {"added_cpu_ms": round(svc["service"] - own["client"], 3),
           "added_cpu_target_ms": target_ms}
    out["added_cpu_met"] = out["added_cpu_ms"] <= target_ms
    if svc.get("neo4j") is not None and own.get("neo4j") is not None:
        out["neo4j_added_cpu_ms"] = round(_neo4j_own(svc) - _neo4j_own(own), 3)
        out["neo4j_added_cpu_met"] = out["neo4j_added_cpu_ms"] <= NEO4J_ADDED_TARGET_MS
    return out


def _neo4j_own(cpu_ms: dict) -> float:
    """Neo4j's CPU a request less its JIT compiler's and its index sampling's."""
    return (cpu_ms["neo4j"] - (cpu_ms.get("neo4j_jit") or 0)
            - (cpu_ms.get("neo4j_index_sampling") or 0))


def one_rate(service_rps: float, bare_rps: float, share: float,
             concurrency: int) -> float | None:
    """The rate both sides are loaded at after their closed loop: `share` of the slower side's
    requests a second there, in whole requests. In a closed loop the slower side pays more a
    request for what does not depend on the request (a wake-up of Neo4j's threads, of the
    event loop, an audit batch's commit, shared by fewer requests), so what the service adds
    is judged where both sides answer the same requests a second. Below the slower side's
    closed-loop rate, so that both keep up. None when `share` is 0, or when the rate would be
    under `concurrency` / 10 a second (wrk would time each connection out between requests)."""
    rate = float(int(share * min(service_rps, bare_rps)))
    if share <= 0 or rate < concurrency / 10:
        return None
    return rate


def above_floor(workloads: dict[str, dict], floor_ms: float | None) -> None:
    """Each workload's added CPU less the HTTP floor (`added_above_floor_ms`): the part of what
    the service adds that is not the serving every route pays. The floor is the service's CPU
    a request on a public route that does no database work; it measures the machine as much as
    the service, so the same code adds more on a slower machine, floor and all."""
    if floor_ms is None:
        return
    for entry in workloads.values():
        if entry.get("added_cpu_ms") is not None:
            entry["added_above_floor_ms"] = round(entry["added_cpu_ms"] - floor_ms, 3)


def held_checkpoint(background: dict | None) -> bool:
    """Whether a checkpoint of Neo4j's ran in a window, by its `neo4j_background`
    (bench/neo4j_log.py): one that ended in it, or one still running at its end. One that
    started before the window and ended after it leaves no line in it and is not seen."""
    background = background or {}
    return bool(background.get("checkpoints") or background.get("checkpoint_running"))


def neo4j_added_outside_checkpoints(services: Sequence[Result],
                                    bares: Sequence[Result]) -> dict:
    """How many rounds held a checkpoint in either side's window (`rounds_with_checkpoint`)
    and, when some did and some did not, Neo4j's difference between the sides over the rounds
    that did not (`neo4j_added_cpu_ms_outside_checkpoints`). A checkpoint under a write load
    raises the CPU a request of Neo4j's statement threads by 0.4-0.5 ms in its window, so the
    side whose window held it looks that much dearer, whatever the service does."""
    clean = [(s, b) for s, b in zip(services, bares, strict=True)
             if not held_checkpoint(s.neo4j_background)
             and not held_checkpoint(b.neo4j_background)]
    out: dict = {"rounds_with_checkpoint": len(services) - len(clean)}
    if clean and len(clean) < len(services):
        added = added_cpu(combined([s for s, _ in clean]), combined([b for _, b in clean]),
                          0.0) or {}
        out["neo4j_added_cpu_ms_outside_checkpoints"] = added.get("neo4j_added_cpu_ms")
    return out


# The most throughput the audit trail may cost the whole service, by workload.
SETTLE_TOLERANCE = 0.10  # a workload has settled when Neo4j's CPU a request moves less than this


def settled(previous_ms: float | None, current_ms: float | None,
            tolerance: float = SETTLE_TOLERANCE) -> bool:
    """Whether Neo4j's CPU a request over a pair of slices (`current_ms`) is within `tolerance`
    of the pair before's (`previous_ms`): the workload's pages are in Neo4j's page cache and
    nothing the workload before left behind is paid for any more. Not before two pairs, nor
    when a pair answered nothing."""
    if previous_ms is None or current_ms is None or previous_ms <= 0:
        return False
    return abs(current_ms - previous_ms) <= tolerance * previous_ms


AUDIT_TARGETS = {"create": 0.10, "get": 0.15}


def audit_rounds(on: Sequence[Result], off: Sequence[Result], target: float | None) -> dict:
    """`audit_cost` of the rounds' windows together (each side's `combined`), with each round's
    share of throughput the trail took (`rounds_throughput_cost`): a difference smaller than
    their spread is noise."""
    out = audit_cost(combined(on), combined(off), target)
    out["rounds_throughput_cost"] = [
        round(1 - a.rps / b.rps, 3) if b.rps > 0 else None for a, b in zip(on, off, strict=True)]
    return out


def audit_cost(on: Result, off: Result, target: float | None) -> dict:
    """The trail's cost, from one workload measured with it on and off: the share of
    throughput it takes (`throughput_cost`, against `target`), and the CPU per request it adds
    to the service and to Neo4j."""
    out: dict = {"on": on.to_dict(), "off": off.to_dict(),
                 "throughput_cost": (round(1 - on.rps / off.rps, 3) if off.rps > 0 else None),
                 "target": target}
    out["met"] = (None if target is None or out["throughput_cost"] is None
                  else out["throughput_cost"] <= target)
    for group in ("service", "neo4j"):
        a, b = (on.cpu_ms or {}).get(group), (off.cpu_ms or {}).get(group)
        out[f"{group}_cpu_ms_added"] = None if a is None or b is None else round(a - b, 3)
    return out
