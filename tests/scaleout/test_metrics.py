"""Metrics per replica (docs/observability.md, docs/operations.md): replicas share no metrics
directory, so each one's listener reports its own requests only, and every scrape names the
replica and process that answered it (`vaultgraph_process_info`)."""

from __future__ import annotations

import urllib.request

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from vaultgraph.testing.service import free_port

from .conftest import two_replicas

CREATED = ("vaultgraph_http_requests_total",
           frozenset({"route": "/tokens", "method": "POST", "status": "201"}.items()))
HEALTH = ("vaultgraph_http_requests_total",
          frozenset({"route": "/health", "method": "GET", "status": "200"}.items()))


def scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def processes(samples: dict) -> list[dict]:
    return [dict(labels) for (name, labels), value in samples.items()
            if name == "vaultgraph_process_info" and value == 1]


async def send(url: str, key: str, creates: int, healths: int) -> None:
    async with aiohttp.ClientSession() as http:
        for i in range(creates):
            async with http.post(f"{url}/tokens", headers={"SVC-API-KEY": key},
                                 json={"type": "token", "data": f"value {i}"}) as resp:
                assert resp.status == 201
        for _ in range(healths):
            async with http.get(f"{url}/health") as resp:
                assert resp.status == 200


async def test_each_replica_reports_its_own_requests_and_names_itself(settings):
    ports = {"a": free_port(), "b": free_port()}
    # Each replica's own metrics listener (no shared VAULTGRAPH_METRICS_DIR: other hosts).
    with two_replicas(settings, ({"VAULTGRAPH_METRICS_PORT": str(ports["a"])},
                                 {"VAULTGRAPH_METRICS_PORT": str(ports["b"])})) as (a, b):
        key = a.create_tenant("metrics-per-replica").key
        before = {name: scrape(port) for name, port in ports.items()}

        await send(a.url, key, creates=5, healths=3)
        middle = {name: scrape(port) for name, port in ports.items()}
        await send(b.url, key, creates=2, healths=4)
        after = {name: scrape(port) for name, port in ports.items()}

        def moved(stage: dict, earlier: dict, replica: str, series) -> float:
            return stage[replica].get(series, 0.0) - earlier[replica].get(series, 0.0)

        # Requests sent to A moved A's counters only, then B's moved B's only.
        assert (moved(middle, before, "a", CREATED), moved(middle, before, "a", HEALTH)) == (5, 3)
        assert (moved(middle, before, "b", CREATED), moved(middle, before, "b", HEALTH)) == (0, 0)
        assert (moved(after, middle, "a", CREATED), moved(after, middle, "a", HEALTH)) == (0, 0)
        assert (moved(after, middle, "b", CREATED), moved(after, middle, "b", HEALTH)) == (2, 4)
        assert processes(after["a"]) == [{"replica": "replica-a", "pid": str(a.pid)}]
        assert processes(after["b"]) == [{"replica": "replica-b", "pid": str(b.pid)}]
