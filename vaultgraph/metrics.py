"""The service's Prometheus metrics: every metric object, in one place (docs/observability.md).

Code anywhere below the HTTP layer records into these objects (no aiohttp here); the metrics
listener (`api/metrics.py`) exposes them. Label values come from small fixed sets only (route
templates, methods, statuses, the kinds named below): never a token id, tenant id, key or data.

Several processes (`--workers N`, or replicas on one host sharing a directory): with
`VAULTGRAPH_METRICS_DIR` set, prometheus-client's multiprocess mode keeps each process's
figures in that directory and a scrape of any process sums them. prometheus-client picks its
mode when it is first imported, so the variable is read here, before that import, and must be
in the environment when the process starts; the directory must be empty when the first process
starts (`prepare_dir`, for whoever starts the workers).

prometheus-client is imported here only: everything else goes through this module.

For other parts of the service:
- rate limiting: `RATE_LIMITED.labels(limit="application").inc()` when a request is refused
  with 429 for its application's bucket, `limit="client_address"` for failed-authentication
  throttling; the request itself is also counted by status in `REQUESTS`.
"""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata
from pathlib import Path

_ENV_DIR = "VAULTGRAPH_METRICS_DIR"
_PROM_DIR = "PROMETHEUS_MULTIPROC_DIR"
if os.environ.get(_ENV_DIR) and not os.environ.get(_PROM_DIR):
    os.environ[_PROM_DIR] = os.environ[_ENV_DIR]
if os.environ.get(_PROM_DIR):
    Path(os.environ[_PROM_DIR]).mkdir(parents=True, exist_ok=True)

from prometheus_client import (  # noqa: E402 - after the environment is set
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    multiprocess,
    values,
)
from prometheus_client.exposition import choose_encoder  # noqa: E402

# The label values a series may carry, besides route templates and 3-digit statuses.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER_METHOD = "OTHER"
UNMATCHED_ROUTE = "unmatched"  # no route matched: the concrete path may hold ids, so never it
NEO4J_ERROR_KINDS = ("unavailable", "transient", "constraint", "database", "driver")
NEO4J_RETRY_KINDS = ("statement", "transaction")
UPDATE_LOCKED_REASONS = ("changed", "dedup", "not_found")  # TOKEN_UPDATES_LOCKED
SWEEP_OUTCOMES = ("ok", "error")
RATE_LIMITS = ("application", "client_address")
# Webhook attempts: 2xx, another status, a redirect (never followed), no answer in time, no
# connection, an address the outbound policy refused, a request too large, the secret unreadable.
WEBHOOK_OUTCOMES = ("success", "status", "redirect", "timeout", "unreachable", "refused",
                    "request_too_large", "error")

# Seconds; a token read answers in ~2 ms on a quiet machine, a page of masked tokens in ~10 ms.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0)

REQUESTS = Counter("vaultgraph_http_requests", "HTTP requests answered, by route template, "
                   "method and status.", ["route", "method", "status"])
LATENCY = Histogram("vaultgraph_http_request_duration_seconds", "Time from the request's "
                    "arrival to its answer, by route template and method.", ["route", "method"],
                    buckets=LATENCY_BUCKETS)
IN_PROGRESS = Gauge("vaultgraph_http_requests_in_progress", "Requests being answered now.",
                    multiprocess_mode="livesum")

NEO4J_ERRORS = Counter("vaultgraph_neo4j_errors", "Neo4j failures that reached the service "
                       "(after retries), by kind: unavailable, transient, constraint (a "
                       "uniqueness conflict, answered 409), database, driver.", ["kind"])
NEO4J_RETRIES = Counter("vaultgraph_neo4j_retries", "Retries after a transient Neo4j error: "
                        "an auto-commit statement retried by the service, or a managed "
                        "transaction retried by the driver.", ["kind"])
TOKEN_UPDATES_LOCKED = Counter("vaultgraph_token_updates_locked", "Token updates written "
                               "under the token's lock, by why: changed (the token changed or "
                               "went after the update read it), dedup (it may look for a "
                               "duplicate), not_found (its read found no token).", ["reason"])
NEO4J_SESSIONS_IN_USE = Gauge("vaultgraph_neo4j_sessions_in_use", "Driver sessions running a "
                              "statement or transaction now; each holds one pooled connection.",
                              multiprocess_mode="livesum")
NEO4J_POOL_SIZE = Gauge("vaultgraph_neo4j_pool_size", "Configured largest connection pool, "
                        "per process.", multiprocess_mode="livemax")

SWEEPS = Counter("vaultgraph_expiry_sweeps", "Expiry sweeper passes, by outcome.", ["outcome"])
SWEPT = Counter("vaultgraph_expiry_deleted_tokens", "Expired tokens the sweeper deleted.")
SWEEP_SKIPPED = Counter("vaultgraph_expiry_skipped_batches", "Sweeper batches that failed and "
                        "were left for the next pass.")
SWEEP_DURATION = Histogram("vaultgraph_expiry_sweep_duration_seconds", "Time one sweeper pass "
                           "took.", buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0))

AUDIT_BATCHES = Counter("vaultgraph_audit_batches", "Audit group commits written.")
AUDIT_EVENTS = Counter("vaultgraph_audit_events", "Audit events written in group commits "
                       "(events / batches = the mean batch size).")
AUDIT_BATCH_SIZE = Histogram("vaultgraph_audit_batch_size", "Events per audit group commit.",
                             buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
WRITES_TOGETHER = Histogram("vaultgraph_creates_written_together", "Creates per statement of "
                            "creates written together (repository/coalesce.py): those that "
                            "waited while earlier ones were written.",
                            buckets=(1, 2, 4, 8, 16, 32, 64))
READS_TOGETHER = Histogram("vaultgraph_gets_read_together", "Gets per statement of gets read "
                           "together (repository/coalesce.py): those that waited while earlier "
                           "ones were read.", buckets=(1, 2, 4, 8, 16, 32, 64))
AUDIT_COMMIT = Histogram("vaultgraph_audit_commit_seconds", "Time one audit group commit took "
                         "(its statement and commit, the log forced to disk): every read and "
                         "refusal in the batch waits for it before its answer.",
                         buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                                  2.5))
AUDIT_FAILURES = Counter("vaultgraph_audit_batch_failures", "Audit batches that could not be "
                         "written (their requests failed closed with 503).")
AUDIT_CHAINS = Counter("vaultgraph_audit_chains_started", "Audit chains started (one per "
                       "writer, and a new one after each failed batch).")

# What stops a process from answering (vaultgraph/stall_monitor.py). Seconds; the loop's lag is
# read every 0.1 s, so a stall is seen once however many requests it held up.
STALL_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
EVENT_LOOP_LAG = Histogram("vaultgraph_event_loop_lag_seconds", "How much later than asked the "
                           "event loop ran a timer it was given every 0.1 s: time in which no "
                           "request of the process could make progress (CPU work in a "
                           "callback, a garbage collection, the process waiting for a core).",
                           buckets=STALL_BUCKETS)
GC_PAUSE = Histogram("vaultgraph_python_gc_pause_seconds", "Python's cyclic garbage "
                     "collections, by generation: the time each stopped the process.",
                     ["generation"], buckets=STALL_BUCKETS)
GC_FROZEN = Gauge("vaultgraph_python_gc_frozen_objects", "Objects start-up left that the "
                  "collector no longer walks (gc.freeze once the process is ready; summed over "
                  "the workers).", multiprocess_mode="livesum")

RATE_LIMITED = Counter("vaultgraph_rate_limited_requests", "Requests refused with 429, by the "
                       "limit that refused them: application (its token bucket) or "
                       "client_address (repeated failed authentication).", ["limit"])

WEBHOOK_ATTEMPTS = Counter("vaultgraph_webhook_attempts", "Webhook delivery attempts, by "
                           "outcome (metrics.WEBHOOK_OUTCOMES).", ["outcome"])
WEBHOOK_FAILED = Counter("vaultgraph_webhook_failed_deliveries", "Webhook deliveries failed for "
                         "good, after the last attempt of the retry schedule.")
WEBHOOK_DISABLED = Counter("vaultgraph_webhook_disabled", "Webhooks disabled after failing "
                           "every delivery for the configured time.")
WEBHOOK_LAG = Histogram("vaultgraph_webhook_delivery_lag_seconds", "Time from a change's commit "
                        "to its event's successful delivery (the outbox's queue lag, retries "
                        "included).", buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                                               60.0, 300.0, 1800.0, 7200.0, 36000.0))

# One series per live process: a scrape names the replica and process that answered (a label
# `replica`, not `instance`, which Prometheus sets itself from the scrape target).
PROCESS_INFO = Gauge("vaultgraph_process_info", "Always 1; the labels name the process: its "
                     "replica (VAULTGRAPH_REPLICA, else the host name) and its pid.",
                     # "liveall": one series per live process. The summing modes (max, sum,
                     # ...) drop a label named pid when the processes' files are merged.
                     ["replica", "pid"], multiprocess_mode="liveall")

BUILD_INFO = Gauge("vaultgraph_build_info", "Always 1; the labels name the running build.",
                   ["version", "python", "neo4j_driver"], multiprocess_mode="max")


def multiprocess_mode() -> bool:
    """prometheus-client's multiprocess mode is on (decided when it was first imported)."""
    return getattr(values.ValueClass, "_multiprocess", False)


def exposition(accept: str) -> tuple[bytes, str]:
    """Every metric, summed over the processes sharing the directory in multiprocess mode, in
    the format the scraper accepts (OpenMetrics or the Prometheus text format): body, type."""
    if multiprocess_mode():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type


def process_exiting() -> None:
    """Drop this process's live gauges from the shared directory (its counters stay)."""
    if multiprocess_mode():
        multiprocess.mark_process_dead(os.getpid())


def prepare_dir(path: str | os.PathLike) -> None:
    """Empty the multiprocess directory: call once, in the parent, before workers start.

    Only prometheus-client's own files (`*.db`) are removed. A directory holding anything else
    is refused, never emptied: `VAULTGRAPH_METRICS_DIR` set to the wrong place (the home, with
    the key-encryption key and Neo4j's data) must not cost its contents."""
    from .settings import ConfigError

    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    entries = list(directory.iterdir())
    other = sorted(e.name for e in entries if not (e.suffix == ".db" and e.is_file()))
    if other:
        raise ConfigError(f"{_ENV_DIR} {directory} holds other files than metrics "
                          f"({', '.join(other[:3])}{', …' if len(other) > 3 else ''})",
                          f"set {_ENV_DIR} to a directory of its own (new or empty)")
    for entry in entries:
        entry.unlink(missing_ok=True)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def record_build(replica: str = "") -> None:
    BUILD_INFO.labels(version=_version("vaultgraph"), python=platform.python_version(),
                      neo4j_driver=_version("neo4j")).set(1)
    PROCESS_INFO.labels(replica=replica or socket.gethostname(), pid=str(os.getpid())).set(1)
