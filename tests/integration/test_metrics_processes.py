"""Metrics across processes (docs/observability.md): two `vaultgraph serve` processes sharing
VAULTGRAPH_METRICS_DIR, as `--workers N` runs them, each scrape answering for both."""

from __future__ import annotations

import time
import urllib.request

from factories import children_of, service_env
from prometheus_client.parser import text_string_to_metric_families

from vaultgraph.settings import available_cpus
from vaultgraph.testing.service import ServiceProcess, free_port


def scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def hit(url: str, times: int) -> None:
    for _ in range(times):
        with urllib.request.urlopen(f"{url}/health", timeout=10) as resp:
            assert resp.status == 200


HEALTH_OK = ("vaultgraph_http_requests_total",
             frozenset({"route": "/health", "method": "GET", "status": "200"}.items()))
HEALTH_TIMED = ("vaultgraph_http_request_duration_seconds_count",
                frozenset({"route": "/health", "method": "GET"}.items()))


def test_two_processes_sharing_the_directory_report_their_sum(settings, tmp_path):
    base = {**service_env(settings), "VAULTGRAPH_AUDIT_PRUNE_INTERVAL": "0",
            "VAULTGRAPH_METRICS_DIR": str(tmp_path / "metrics")}
    ports = free_port(), free_port()
    with ServiceProcess({**base, "VAULTGRAPH_METRICS_PORT": str(ports[0])}) as one, \
            ServiceProcess({**base, "VAULTGRAPH_METRICS_PORT": str(ports[1])}) as two:
        hit(one.url, 7)
        hit(two.url, 4)
        first, second = scrape(ports[0]), scrape(ports[1])
        for samples in (first, second):
            assert samples[HEALTH_OK] == 11
            assert samples[HEALTH_TIMED] == 11
            assert samples[("vaultgraph_neo4j_pool_size", frozenset())] == 100
            [build] = [v for (name, _), v in samples.items() if name == "vaultgraph_build_info"]
            assert build == 1
        # Each process froze what its start-up left once it was ready (server.settle_heap).
        frozen = ("vaultgraph_python_gc_frozen_objects", frozenset())
        deadline = time.monotonic() + 30
        while scrape(ports[0]).get(frozen, 0) < 2 * 10_000 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert scrape(ports[0])[frozen] >= 2 * 10_000  # the two processes' sum
        # each process keeps its own file; none holds the other's figures
        assert len(list((tmp_path / "metrics").glob("counter_*.db"))) == 2
    # live gauges of a stopped process are dropped (process_info's too); its counters stay
    assert not list((tmp_path / "metrics").glob("gauge_live*_*.db"))



def test_workers_zero_runs_one_per_cpu(settings):
    """VAULTGRAPH_WORKERS=0 without the local Neo4j: one worker per CPU the process may use.
    The test pins itself, and so the service it starts, to at most two CPUs."""
    import os

    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, sorted(mask)[:2])
    try:
        with ServiceProcess({**service_env(settings), "VAULTGRAPH_AUDIT_PRUNE_INTERVAL": "0",
                             "VAULTGRAPH_WORKERS": "0"}) as service:
            hit(service.url, 1)
            workers = available_cpus()
            assert workers == min(2, len(mask))
            assert len(children_of(service.pid)) == (workers if workers > 1 else 0)
    finally:
        os.sched_setaffinity(0, mask)


def test_workers_on_a_metrics_port_share_a_private_directory(settings, tmp_path):
    """No VAULTGRAPH_METRICS_DIR: `serve` makes one for its workers, so whichever worker answers
    a scrape reports them all, and removes it once they are gone."""
    port = free_port()
    with ServiceProcess({**service_env(settings), "VAULTGRAPH_AUDIT_PRUNE_INTERVAL": "0",
                         "VAULTGRAPH_WORKERS": "2", "VAULTGRAPH_METRICS_PORT": str(port),
                         "TMPDIR": str(tmp_path)}) as service:
        workers = {str(p) for p in children_of(service.pid)}
        assert len(workers) == 2
        [private] = tmp_path.glob("vaultgraph-metrics-*")
        # /ready answered from one worker; the other names itself once it has started
        deadline = time.monotonic() + 30
        while process_pids(scrape(port)) != workers and time.monotonic() < deadline:
            time.sleep(0.2)
        hit(service.url, 12)  # a connection each: the kernel spreads them over the workers
        for samples in [scrape(port) for _ in range(6)]:  # answered by either worker
            assert samples[HEALTH_OK] == 12
            assert process_pids(samples) == workers
    assert not private.exists()


def process_pids(samples: dict) -> set[str]:
    return {dict(labels)["pid"] for (name, labels), v in samples.items()
            if name == "vaultgraph_process_info" and v == 1}
