"""GET /metrics (docs/observability.md): what is counted, on the real Neo4j, and that no label
ever carries a token id, tenant id or data — every label value is checked against the small
sets it may come from."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import re
import socket
import uuid

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from vaultgraph import metrics
from vaultgraph.api.metrics import metrics_app
from vaultgraph.api.routes import ENDPOINTS
from vaultgraph.api.typedefs import services_key
from vaultgraph.app import create_app

CARD = {"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030,
        "cvc": "123"}
ROUTES = {endpoint.path for table in ENDPOINTS for endpoint, _ in table}
# Every label name the service uses, and what its values may be.
ALLOWED = {
    "route": ROUTES | {metrics.UNMATCHED_ROUTE},
    "method": metrics.METHODS | {metrics.OTHER_METHOD},
    "status": re.compile(r"^[1-5]\d\d$"),
    "kind": set(metrics.NEO4J_ERROR_KINDS) | set(metrics.NEO4J_RETRY_KINDS),
    "outcome": set(metrics.SWEEP_OUTCOMES) | set(metrics.WEBHOOK_OUTCOMES),
    "limit": set(metrics.RATE_LIMITS),
    "reason": set(metrics.UPDATE_LOCKED_REASONS),
    "le": re.compile(r"^(\+Inf|\d+(\.\d+)?(e[+-]?\d+)?)$"),
    "version": re.compile(r"^[\w.+-]+$"),
    "python": re.compile(r"^\d+\.\d+\.\d+\w*$"),
    "neo4j_driver": re.compile(r"^[\w.+-]+$"),
    "replica": re.compile(r"^[\w.:-]+$"),  # VAULTGRAPH_REPLICA or the host name
    "pid": re.compile(r"^\d+$"),
    # prometheus-client's own process and interpreter collectors (single-process mode)
    "generation": {"0", "1", "2"},
    "implementation": {"CPython", "PyPy"},
    "major": re.compile(r"^\d+$"), "minor": re.compile(r"^\d+$"),
    "patchlevel": re.compile(r"^\d+\w*$"),
}


@pytest.fixture
async def scrape(aiohttp_client):
    """GET /metrics on the metrics listener's app (one registry per process, like the service):
    returns the exposition text and {(sample name, frozenset(labels)): value}."""
    listener = await aiohttp_client(metrics_app())

    async def get() -> tuple[str, dict]:
        resp = await listener.get("/metrics")
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        assert resp.headers["Server"] == "vaultgraph"  # no versions
        for other in (await listener.get("/nothing"), await listener.post("/metrics")):
            assert (other.status, other.headers["Server"]) in ((404, "vaultgraph"),
                                                                (405, "vaultgraph"))
        text = await resp.text()
        samples = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples[(s.name, frozenset(s.labels.items()))] = s.value
        return text, samples

    return get


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_requests_are_counted_by_template_and_labels_hold_no_ids(client, tenant,
                                                                       admin_headers, scrape):
    _, before = await scrape()
    ids = [f"metric-{uuid.uuid4().hex}" for _ in range(5)]
    for token_id in ids:
        resp = await client.post("/tokens", json={"type": "card", "id": token_id, "data": CARD,
                                                  "metadata": {"customer": token_id}},
                                 headers=admin_headers)
        assert resp.status == 201, await resp.text()
    for token_id in ids:
        assert (await client.get(f"/tokens/{token_id}", headers=admin_headers)).status == 200
    for token_id in ids:  # unknown, malformed, unmatched, odd methods, no key
        assert (await client.get(f"/tokens/{token_id}-nope", headers=admin_headers)).status == 404
        assert (await client.get(f"/nowhere/{token_id}")).status == 404
        assert (await client.request("PROPFIND", f"/tokens/{token_id}")).status == 405
        assert (await client.get(f"/tokens/{token_id}")).status == 401
        resp = await client.get("/tokens", params={"metadata.customer": token_id,
                                                   "size": "1"}, headers=admin_headers)
        assert resp.status == 200
    assert (await client.get("/tokens", params={"size": "1000"},
                             headers=admin_headers)).status == 400
    text, after = await scrape()

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    counted = "vaultgraph_http_requests_total"
    assert delta(counted, route="/tokens", method="POST", status="201") == 5
    assert delta(counted, route="/tokens/{id}", method="GET", status="200") == 5
    assert delta(counted, route="/tokens/{id}", method="GET", status="404") == 5
    assert delta(counted, route="/tokens/{id}", method="GET", status="401") == 5
    assert delta(counted, route=metrics.UNMATCHED_ROUTE, method="GET", status="404") == 5
    assert delta(counted, route=metrics.UNMATCHED_ROUTE, method="OTHER", status="405") == 5
    assert delta(counted, route="/tokens", method="GET", status="200") == 5
    assert delta(counted, route="/tokens", method="GET", status="400") == 1
    timed = "vaultgraph_http_request_duration_seconds_count"
    assert delta(timed, route="/tokens/{id}", method="GET") == 15
    assert value(after, "vaultgraph_http_requests_in_progress") == 0
    # Every read and refusal left an audit event, group-committed by the writer.
    assert delta("vaultgraph_audit_events_total") >= 20
    assert delta("vaultgraph_audit_batches_total") >= 1
    # The batch-size histogram observes every batch, its sum every event.
    assert delta("vaultgraph_audit_batch_size_count") == delta("vaultgraph_audit_batches_total")
    assert delta("vaultgraph_audit_batch_size_sum") == delta("vaultgraph_audit_events_total")
    assert value(after, "vaultgraph_audit_chains_started_total") >= 1
    assert value(after, "vaultgraph_build_info", version=_version(after),
                 python=_python(after), neo4j_driver=_driver(after)) == 1

    for key, sample_value in after.items():
        # The registry is the process's: other tests' apps add routes of their own (templates
        # too); the series this test moved must name the service's routes only.
        moved = sample_value != before.get(key)
        for name, label_value in key[1]:
            allowed = ALLOWED.get(name)
            assert allowed is not None, f"unexpected label {name}={label_value}"
            if name == "route" and not moved:
                continue
            ok = (allowed.match(label_value) if isinstance(allowed, re.Pattern)
                  else label_value in allowed)
            assert ok, f"label {name}={label_value!r} is outside its set"
    for secret in [*ids, tenant.tenant_id, CARD["number"], admin_headers["SVC-API-KEY"]]:
        assert secret not in text


def _build_label(samples: dict, label: str) -> str:
    return next(dict(labels)[label] for (name, labels) in samples
                if name == "vaultgraph_build_info")


def _version(samples):
    return _build_label(samples, "version")


def _python(samples):
    return _build_label(samples, "python")


def _driver(samples):
    return _build_label(samples, "neo4j_driver")


async def test_the_service_times_its_event_loop_collections_and_audit_commits(
        client, admin_headers, scrape):
    """The app runs the stall monitor (vaultgraph/stall_monitor.py) from start-up to shutdown; every
    audit group commit is timed."""
    _, before = await scrape()
    assert (await client.get("/tokens?size=1", headers=admin_headers)).status == 200
    gc.collect()
    await asyncio.sleep(0.35)
    text, after = await scrape()
    assert "# TYPE vaultgraph_event_loop_lag_seconds histogram" in text
    assert "# TYPE vaultgraph_python_gc_pause_seconds histogram" in text
    lag = "vaultgraph_event_loop_lag_seconds_count"
    assert value(after, lag) - value(before, lag) >= 2  # a tick every 0.1 s
    full = "vaultgraph_python_gc_pause_seconds_count"
    assert value(after, full, generation="2") - value(before, full, generation="2") >= 1
    commits = "vaultgraph_audit_commit_seconds_count"
    assert value(after, commits) - value(before, commits) >= 1  # the read's event's batch


async def test_a_uniqueness_conflict_counts_as_a_constraint_error(client, admin_headers, scrape):
    token_id = f"dup-{uuid.uuid4().hex}"
    body = {"type": "token", "id": token_id, "data": {"a": 1}}
    assert (await client.post("/tokens", json=body, headers=admin_headers)).status == 201
    _, before = await scrape()
    assert (await client.post("/tokens", json=body, headers=admin_headers)).status == 409
    _, after = await scrape()
    name = "vaultgraph_neo4j_errors_total"
    assert value(after, name, kind="constraint") - value(before, name, kind="constraint") == 1
    assert value(after, "vaultgraph_neo4j_sessions_in_use") == 0
    assert value(after, "vaultgraph_neo4j_pool_size") == 100


async def test_an_unreachable_neo4j_counts_as_unavailable(settings, aiohttp_client, scrape):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = await aiohttp_client(create_app(dataclasses.replace(
        settings, neo4j_uri=f"bolt://127.0.0.1:{port}", webhook_poll_interval=0.0)))
    _, before = await scrape()
    assert (await down.get("/ready")).status == 503
    _, after = await scrape()
    name = "vaultgraph_neo4j_errors_total"
    assert value(after, name, kind="unavailable") - value(before, name, kind="unavailable") == 1
    assert value(after, "vaultgraph_http_requests_total", route="/ready", method="GET",
                 status="503") >= 1


async def test_sweeper_runs_and_deletions_are_counted(client, tenant, admin_headers, scrape):
    ids = [f"exp-{uuid.uuid4().hex}" for _ in range(3)]
    for token_id in ids:
        resp = await client.post("/tokens", json={"type": "token", "id": token_id,
                                                  "data": {"a": 1}, "expires_at": "1/1/2999"},
                                 headers=admin_headers)
        assert resp.status == 201
    db = client.server.app[services_key].database
    await db.driver.execute_query(  # test set-up: the API refuses a past expiry, rightly
        "MATCH (t:Token {tenant_id: $t}) WHERE t.id IN $ids "
        "SET t.expires_at = datetime() - duration('PT1M')",
        {"t": tenant.tenant_id, "ids": ids}, database_=db.database)
    _, before = await scrape()
    swept = await client.server.app[services_key].expiry.sweep()
    _, after = await scrape()

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert swept >= 3  # and others' expired tokens, if any are due
    assert delta("vaultgraph_expiry_sweeps_total", outcome="ok") == 1
    assert delta("vaultgraph_expiry_deleted_tokens_total") == swept
    assert delta("vaultgraph_expiry_sweep_duration_seconds_count") == 1


async def test_metrics_have_their_own_listener_and_are_not_on_the_api(settings, aiohttp_client):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = await aiohttp_client(create_app(dataclasses.replace(settings, metrics_port=port)))
    assert (await api.get("/metrics")).status == 404
    async with aiohttp.ClientSession() as session, \
            session.get(f"http://127.0.0.1:{port}/metrics") as resp:
        assert resp.status == 200
        assert "vaultgraph_http_requests_total" in await resp.text()
    async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{port}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"}) as resp:
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        assert (await resp.text()).endswith("# EOF\n")
