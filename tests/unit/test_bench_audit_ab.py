"""bench/audit_ab.py's pure parts: the order of a round's runs and the summary of its sides."""

from __future__ import annotations

import sys
from collections import Counter

from vaultgraph.settings import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:  # bench/ is the checkout's, not the distribution's
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.audit_ab import Side, orders, summarize
from bench.audit_forms import Form


def test_each_run_goes_first_and_last_equally_often_over_a_cycle():
    for sides in (["full"], ["full", "without"]):
        runs = [orders(sides, n) for n in range(2 * len(sides))]
        assert all(sorted(r) == sorted(runs[0]) and len(r) == 2 * len(sides) for r in runs)
        assert set(Counter(r[0] for r in runs).values()) == {1}
        assert set(Counter(r[-1] for r in runs).values()) == {1}


def test_each_side_is_measured_against_its_own_plain_mode():
    def s(rps, neo4j, client):
        return {"rps": rps, "neo4j": neo4j, "client": client}

    samples = {}
    for name in ("create", "get"):
        samples[(name, "full", False)] = [s(1000, 1.0, 0.5), s(1200, 0.8, 0.5)]
        samples[(name, "full", True)] = [s(800, 1.4, 0.7), s(800, 1.2, 0.7)]
        samples[(name, "less", False)] = [s(1000, 2.0, 0.5)]
        samples[(name, "less", True)] = [s(900, 2.1, 0.6)]
    sides = {"full": {"indexes_dropped": [], "write_event_form": "service"},
             "less": {"indexes_dropped": ["audit_at"], "write_event_form": "service"}}
    out = summarize(samples, sides, 2, 1, 100)
    full, less = out["workloads"]["get"]["full"], out["workloads"]["get"]["less"]
    assert full["plain"] == {"rps": 1100, "neo4j": 0.9, "client": 0.5}
    assert full["throughput_cost"] == round(1 - 800 / 1100, 3)
    assert full["neo4j_ms_added"] == 0.4
    assert full["audited_neo4j_rounds"] == [1.4, 1.2]
    assert less["neo4j_ms_added"] == 0.1 and less["cpu_ms_added"] == 0.2
    assert out["sides"] == sides


def test_one_side_keeps_the_single_rows_shape():
    samples = {(name, "full", audit): [{"rps": 10, "neo4j": 1.0, "client": 1.0}]
               for name in ("create", "get") for audit in (False, True)}
    out = summarize(samples, {"full": {"indexes_dropped": []}}, 1, 1, 10)
    assert out["workloads"]["create"]["throughput_cost"] == 0.0


async def test_a_side_that_never_opened_closes_quietly():
    await Side(None, ()).close()  # a run whose other side failed to start still cleans up


def test_an_unknown_form_is_refused_by_name():
    try:
        Form("twice")
    except SystemExit as exc:
        assert "twice" in str(exc) and "once" in str(exc)
    else:
        raise AssertionError("an unknown form was taken")


async def test_the_once_form_sends_the_event_complete_with_numbers_in_order():
    form = Form("once")
    event = {"id": "e1", "at": None, "operation": "token:create"}
    texts, params = zip(*[await form.statement(None, "RETURN 1", {"x": 1}, event)
                          for _ in range(2)], strict=True)
    assert all(t.endswith("RETURN 1") and "PendingAuditEvent" not in t for t in texts)
    assert [p["audit_seq"] for p in params] == [1, 2]
    assert all(p["x"] == 1 and p["audit"]["id"] == "e1" for p in params)
    assert all(len(p["audit_mac"] + p["audit_mac_end"]) == 32 for p in params)
    assert form.linked_after and Form("ahead").linked_after and not Form("intent").linked_after


def test_a_failed_audit_batch_is_counted_so_a_run_with_one_is_refused():
    from bench.audit_ab import failed_batches
    from vaultgraph import metrics

    before = failed_batches()
    metrics.AUDIT_FAILURES.inc()
    assert failed_batches() == before + 1


def test_each_form_s_statements_are_the_service_s_with_one_part_changed():
    from bench.audit_forms import _ONCE_PREFIX, _ahead, _block, variant
    from vaultgraph.catalog import Catalog
    from vaultgraph.repository.audit_prefix import AUDIT_PREFIX

    batch = Catalog.load().text("audit/write_batch")
    block, ahead = _block(batch), _ahead(batch)
    assert "MERGE (e:PendingAuditEvent" in batch and "MERGE (e:PendingAuditEvent" not in block
    assert "CREATE (:AuditBlock" in block and block.count("$created") == batch.count("$created")
    assert "size($ahead)" in ahead and ahead.count("$linked") == batch.count("$linked")
    assert "PendingAuditEvent" not in _ONCE_PREFIX
    assert "audit_event.seq = $audit_seq" in _ONCE_PREFIX
    assert _ONCE_PREFIX.split("\n")[1] == AUDIT_PREFIX.split("\n")[1]  # the idempotency mark
    try:
        variant(batch, "a part it lacks", "")
    except RuntimeError as exc:
        assert "a part it lacks" in str(exc)
    else:
        raise AssertionError("a part the statement lacks was replaced silently")
