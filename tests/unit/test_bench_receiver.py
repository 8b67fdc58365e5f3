"""The webhook_create workload's pieces that need no database: the receiver's checks of a
delivery (bench/receiver.py), the bare deliveries' share of an endpoint against the sender's,
the report's notes on how each side's deliveries kept up and what the ratio is of, and the
figures bench/run.py derives."""

from __future__ import annotations

import dataclasses
import sys
import time

import orjson
import pytest

from vaultgraph.services.webhook_sender import WebhookSender
from vaultgraph.settings import PROJECT_ROOT, Settings
from vaultgraph.webhooks import headers, new_secret

if str(PROJECT_ROOT) not in sys.path:  # bench/ is the checkout's, not the distribution's
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.config import BenchConfig
from bench.outbox import shares
from bench.receiver import Receiver
from bench.report import outbox_notes, table
from bench.run import loop_statements, outbox_refused, with_drain
from bench.stats import Result


def _event(event_id: str) -> bytes:
    return orjson.dumps({"id": event_id, "type": "token.created",
                         "timestamp": "2026-12-01T19:00:00.123456789Z", "tenant_id": "t",
                         "data": {}})


async def test_the_receiver_counts_deliveries_and_refuses_a_bad_signature(aiohttp_client):
    receiver = Receiver()
    client = await aiohttp_client(receiver.app())
    secret, other = new_secret(), new_secret()
    assert (await client.put("/secret/side", data=secret)).status == 204
    now = int(time.time())

    async def post(body: bytes, sent: dict) -> None:
        resp = await client.post("/hook/side", data=body, headers=sent)
        assert resp.status == 204

    # An unreadable delivery first: the window's figures below must still line up.
    await post(b"not json", headers([secret], "e0", now, b"not json"))
    await post(_event("e1"), headers([secret], "e1", now, _event("e1")))
    # While a rotation's old secret still signs, either signature will do.
    await post(_event("e2"), headers([other, secret], "e2", now, _event("e2")))
    await post(_event("e3"), headers([other], "e3", now, _event("e3")))  # another secret
    await post(_event("e4"), headers([secret], "e4", now, _event("e5")))  # another body
    await post(_event("e6"), headers([secret], "e7", now, _event("e6")))  # id not the body's

    stats = await (await client.get("/stats/side")).json()
    assert stats["received"] == 6
    assert stats["bad"] == 4
    # The lag of the five that carried a timestamp (a date past: positive).
    assert stats["lag_p50_ms"] > 0
    # From the 2nd delivery on (counted as `received` counts): the unreadable one is left out.
    window = await (await client.get("/stats/side?since=1")).json()
    assert (window["received"], window["bad"]) == (6, 3)
    # The last delivery alone: timed, and refused.
    last = await (await client.get("/stats/side?since=5")).json()
    assert last["bad"] == 1
    assert last["lag_p50_ms"] == last["lag_p99_ms"] > 0
    after = await (await client.get("/stats/side?since=6")).json()
    assert (after["bad"], after["lag_p50_ms"]) == (0, None)  # nothing after the sixth
    other_hook = await (await client.get("/stats/other")).json()
    assert other_hook == {"received": 0, "bad": 0, "lag_p50_ms": None, "lag_p99_ms": None}


def _sender(settings: Settings) -> WebhookSender:
    return WebhookSender(
        None, None, None, schedule=settings.webhook_retry_schedule_seconds,  # type: ignore[arg-type]
        lease=settings.webhook_lease, timeout=settings.webhook_timeout,
        disable_after=settings.webhook_disable_after, interval=settings.webhook_poll_interval,
        batch=settings.webhook_max_in_flight, per_endpoint=settings.webhook_endpoint_concurrency,
        retention=settings.webhook_retention_days * 86_400)


def test_the_bare_share_of_an_endpoint_is_the_senders():
    base = Settings()
    for changes in ({}, {"webhook_max_in_flight": 40}, {"webhook_lease": 11.0},
                    {"webhook_timeout": 2.0, "webhook_endpoint_concurrency": 4},
                    {"webhook_lease": 600.0, "webhook_timeout": 1.0}):
        settings = dataclasses.replace(base, **changes)
        assert shares(settings) == _sender(settings)._shares, changes


def test_the_report_says_how_each_sides_deliveries_kept_up():
    side = {"created_per_s": 900.0, "delivered_during_load": 13_400, "delivered_per_s": 893.3,
            "pending_at_end": 41, "drain_s": 0.4, "pending_after_drain": 0,
            "lag_p50_ms": 12.5, "lag_p99_ms": 80.0, "received_bad": 0}
    result = {"workloads": {
        "get": {"service": {"rps": 1.0}},
        "webhook_create": {"service": {"cpu_ms": {"receiver": 0.08}}, "bare": {},
                           "outbox": {"service": side,
                                      "bare": {**side, "pending_after_drain": 7}}}}}
    [note] = outbox_notes(result)
    assert note.startswith("- webhook_create: deliveries during the load: service 893/s for "
                           "900 creates/s, 41 pending at the load's end (drained within the "
                           "window in 0.4s), ")
    assert "receiver 0.08 ms CPU a create; bare 893/s" in note
    assert "(drained within the window in 0.4s, 7 not)" in note


def test_the_note_and_the_table_say_the_ratio_counts_the_drain():
    side = {"created_per_s": 300.0, "created_per_s_with_drain": 250.0,
            "delivered_during_load": 0, "delivered_per_s": None, "pending_at_end": 3000,
            "drain_s": 2.0, "pending_after_drain": 0, "lag_p50_ms": None, "lag_p99_ms": None,
            "received_bad": 0}
    bare = {**side, "created_per_s_with_drain": 200.0, "claims": 40, "empty_claims": 4,
            "records": 60, "statements_per_delivery": 0.033}
    w = {"ratio": 1.25, "ratio_load": 1.0, "ratio_basis": "with_drain",
         "service": {"neo4j_tx": 1.1}, "bare": {},
         "outbox": {"service": side, "bare": bare}}
    first, second = outbox_notes({"workloads": {"webhook_create": w}})
    assert "service -/s for 300 creates/s" in first  # none arrived during the load
    assert "Neo4j transactions a create 1.10" in first
    assert "0.03 loop statements a delivery (40 claims, 4 empty, 60 records)" in first
    assert second == ("- webhook_create: its ratio is of creates a second over the load and "
                      "the drain of its deliveries (service 250/s, bare 200/s); over the load "
                      "alone (the table's req/s) 1.00")
    row = {"rps": 300.0, "p50_ms": 1.0, "p99_ms": 2.0, "p999_ms": 3.0, "errors": 0}
    result = {"settings": {"concurrency": 32, "warmup_s": 3, "duration_s": 10},
              "stored_tokens": 1, "loadgen": "wrk", "git_sha": "x", "date": "d",
              "machine": {"nproc": 2, "cpu_model": "c", "mem_gib": 4, "python": "3.11"},
              "workloads": {"webhook_create": {**w, "service": row, "bare": row}}}
    assert "| 1.25 (with drain) |" in table(result)


def test_creates_a_second_with_the_drain_and_the_loops_statements():
    load = Result(requests=1010, errors=10, seconds=10.0, p50_ms=1, p99_ms=2, p999_ms=3)
    assert with_drain(load, 2.5) == 80.0  # 1000 creates over 12.5 s
    assert with_drain(load, None) == 100.0
    before = {"claims": 5, "empty_claims": 1, "records": 3, "delivered": 10, "failed": 0}
    after = {"claims": 25, "empty_claims": 6, "records": 43, "delivered": 205, "failed": 5}
    assert loop_statements(before, after) == {
        "claims": 20, "empty_claims": 5, "records": 40, "statements_per_delivery": 0.3}


def test_an_outbox_workload_is_refused_when_the_sender_never_runs():
    assert outbox_refused({}) is None
    assert "VAULTGRAPH_WEBHOOK_POLL_INTERVAL" in outbox_refused(
        {"VAULTGRAPH_WEBHOOK_POLL_INTERVAL": "0"})


def test_the_note_names_the_fixed_rate_and_what_each_side_answered():
    w = {"fixed_rate": 300.0, "service": {"rps": 299.6}, "bare": {"rps": 241.0}, "outbox": {}}
    [note] = outbox_notes({"workloads": {"webhook_create": w}})
    assert note == ("- webhook_create: both sides loaded at a fixed 300 creates a second "
                    "(service 300/s, bare 241/s): a side below it could not keep up, and its "
                    "req/s is what it answered")
    assert outbox_notes({"workloads": {"webhook_create": {**w, "fixed_rate": None}}}) == []
    get = {"fixed_rate": 700.0, "service": {"rps": 699.8}, "bare": {"rps": 700.1}}
    assert outbox_notes({"workloads": {"get": get}}) == [
        "- get: both sides loaded at a fixed 700 requests a second (service 700/s, bare "
        "700/s): a side below it could not keep up, and its req/s is what it answered"]
    row = {"rps": 299.6, "p50_ms": 1.0, "p99_ms": 2.0, "p999_ms": 3.0, "errors": 0}
    result = {"settings": {"concurrency": 32, "warmup_s": 3, "duration_s": 10},
              "stored_tokens": 1, "loadgen": "wrk", "git_sha": "x", "date": "d",
              "machine": {"nproc": 2, "cpu_model": "c", "mem_gib": 4, "python": "3.11"},
              "workloads": {"webhook_create": {**w, "ratio": 1.0, "ratio_basis": "with_drain",
                                               "service": row, "bare": row}}}
    assert "| 1.00 (fixed rate) |" in table(result)


def test_a_fixed_rate_wrk_would_time_out_on_is_refused():
    assert BenchConfig(concurrency=32, webhook_rate=3.2).webhook_rate == 3.2
    assert BenchConfig(webhook_rate=0).webhook_rate == 0
    with pytest.raises(ValueError, match="BENCH_WEBHOOK_RATE must be 0 or at least"):
        BenchConfig.from_env({"BENCH_CONCURRENCY": "32", "BENCH_WEBHOOK_RATE": "3"})
    assert BenchConfig.from_env({"BENCH_FIXED_RATE": "700"}).fixed_rate == 700
    assert BenchConfig().fixed_rate == 0  # a closed loop unless set
    with pytest.raises(ValueError, match="BENCH_FIXED_RATE must be 0 or at least"):
        BenchConfig.from_env({"BENCH_CONCURRENCY": "32", "BENCH_FIXED_RATE": "3"})


def test_the_audit_comparisons_rounds_default_to_the_runs():
    assert BenchConfig(rounds=2).audit_round_count == 2
    assert BenchConfig(rounds=2, audit_rounds=6).audit_round_count == 6
    assert BenchConfig(rounds=0).audit_round_count == 1
    with pytest.raises(ValueError, match="BENCH_AUDIT_ROUNDS must be 0"):
        BenchConfig(audit_rounds=-1)
