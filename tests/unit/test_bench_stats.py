"""The benchmark harness's own logic: percentiles, results, and a data set the API accepts."""

from __future__ import annotations

import gzip
import math
import os
import sys
import time
from pathlib import Path

import pytest

from vaultgraph.settings import PROJECT_ROOT, Settings

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.dataset import (
    PER_CUSTOMER,
    card_data,
    card_metadata,
    card_number,
    customer,
)
from bench.run import bare_settings, on_service_loop
from bench.stats import (
    Result,
    above_floor,
    added_cpu,
    audit_cost,
    audit_rounds,
    percentile,
    ratio,
    settled,
)
from vaultgraph.expressions import luhn_valid
from vaultgraph.tokens.types import get_type


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 99.9) == 100
    assert percentile(values, 100) == 100
    assert percentile(values, 0) == 1


def test_percentile_of_few_values_is_the_maximum_at_the_tail():
    assert percentile([0.1, 0.2, 0.3], 99.9) == 0.3
    assert percentile([0.5], 50) == 0.5


def test_percentile_of_nothing_is_nan_and_q_is_bounded():
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_result_counts_only_successes_in_throughput():
    result = Result.from_latencies([0.003, 0.001, 0.002, 0.004], errors=1, seconds=2.0)
    assert result.requests == 5
    assert result.rps == 2.0
    assert result.p50_ms == pytest.approx(2.0)
    assert result.p999_ms == pytest.approx(4.0)
    assert result.to_dict()["rps"] == 2.0


def test_result_without_successes_has_no_percentiles():
    result = Result.from_latencies([], errors=32, seconds=15.0)
    assert result.rps == 0
    assert result.to_dict()["p50_ms"] is None


def test_ratio_is_service_over_bare_and_absent_without_both():
    service = Result(requests=100, errors=0, seconds=1, p50_ms=1, p99_ms=1, p999_ms=1)
    bare = Result(requests=400, errors=0, seconds=1, p50_ms=1, p99_ms=1, p999_ms=1)
    assert ratio(service, bare) == 0.25
    assert ratio(service, None) is None


def test_added_cpu_is_the_service_less_the_bare_client_and_judged_against_its_target():
    def side(cpu):
        return Result(requests=1, errors=0, seconds=1, p50_ms=1, p99_ms=1, p999_ms=1, cpu_ms=cpu)

    service = side({"service": 0.9, "neo4j": 1.5, "neo4j_jit": 0.2, "loadgen": 0.05})
    bare = side({"client": 0.5, "neo4j": 1.0, "neo4j_jit": 0.0})
    assert added_cpu(service, bare, 0.30) == {
        "added_cpu_ms": 0.4, "added_cpu_target_ms": 0.30, "added_cpu_met": False,
        "neo4j_added_cpu_ms": 0.3, "neo4j_added_cpu_met": False}
    assert added_cpu(service, bare, 0.60)["added_cpu_met"] is True
    assert added_cpu(service, side(None), 0.30) is None
    # Neo4j's target: at most 0.05 ms a request more on the service's side, JIT apart.
    close = side({"service": 0.9, "neo4j": 1.25, "neo4j_jit": 0.2})
    assert added_cpu(close, bare, 0.30)["neo4j_added_cpu_ms"] == 0.05
    assert added_cpu(close, bare, 0.30)["neo4j_added_cpu_met"] is True
    # Neo4j's index sampling runs on its own schedule, in whichever side's window is open: set
    # apart on both sides, as the JIT is.
    sampled = side({"service": 0.9, "neo4j": 1.55, "neo4j_jit": 0.2, "neo4j_index_sampling": 0.3})
    assert added_cpu(sampled, bare, 0.30)["neo4j_added_cpu_ms"] == 0.05
    sampled_bare = side({"client": 0.5, "neo4j": 1.3, "neo4j_jit": 0.0,
                         "neo4j_index_sampling": 0.3})
    assert added_cpu(service, sampled_bare, 0.30)["neo4j_added_cpu_ms"] == 0.3
    assert added_cpu(service, sampled_bare, 0.30)["added_cpu_ms"] == 0.4


def test_one_rate_is_a_share_of_the_slower_sides_closed_loop_in_whole_requests():
    from bench.stats import one_rate

    assert one_rate(503.1, 587.2, 0.75, 32) == 377.0
    assert one_rate(2533.1, 1901.4, 0.75, 32) == 1426.0  # whichever side is slower
    assert one_rate(500.0, 600.0, 0.0, 32) is None       # switched off
    # Under concurrency / 10 a second, wrk would time connections out between requests.
    assert one_rate(4.0, 10.0, 0.75, 32) is None
    assert one_rate(5.0, 10.0, 0.75, 32) is None
    assert one_rate(5.0, 10.0, 0.75, 30) == 3.0


def test_bench_one_rate_is_a_share_below_one():
    from bench.config import BenchConfig

    assert BenchConfig.from_env({}).one_rate == 0.5
    assert BenchConfig.from_env({"BENCH_ONE_RATE": "0"}).one_rate == 0
    for bad in ("1", "1.5", "-0.1"):
        with pytest.raises(ValueError, match="BENCH_ONE_RATE"):
            BenchConfig.from_env({"BENCH_ONE_RATE": bad})


def test_the_report_gives_each_workload_at_one_rate_and_counts_the_targets_both_ways():
    from bench import report

    def side(rps, cpu):
        return {"rps": rps, "cpu_ms": cpu}

    def at(added, met, neo, neo_met):
        return {"added_cpu_ms": added, "added_cpu_target_ms": 0.30, "added_cpu_met": met,
                "neo4j_added_cpu_ms": neo, "neo4j_added_cpu_met": neo_met}

    result = {"workloads": {
        # over both targets in the closed loop, within both at one rate
        "update": {**at(0.33, False, 0.09, False), "at_one_rate": {
            "rate": 377.0, "service": side(377.2, {"service": 1.61}),
            "bare": side(376.9, {"client": 1.33}), **at(0.28, True, -0.02, True),
            "rounds": [{**at(0.27, True, -0.04, True)},
                       {**at(0.29, True, 0.0, True),
                        "service": {"neo4j_background": {"checkpoints": 1}}}]}},
        "get": {**at(0.16, True, 0.01, True), "at_one_rate": {
            "rate": 1688.0, "service": side(1690, {"service": 0.41}),
            "bare": side(1687, {"client": 0.26}), **at(0.15, True, 0.07, False),
            "rounds": []}},
        # measured at a fixed rate already: counted at one rate, not in the closed loop
        "webhook_create": {"fixed_rate": 300.0, **at(0.18, True, -0.27, True)},
        "proxy": {"available": False}}}
    lines = report.one_rate_table(result)
    assert lines[5].startswith("| update | 377 | 377 | 377 | 1.61 | 1.33 | 0.28 (≤ 0.30) | -0.02 ")
    assert "| 0.27; -0.04, 0.29; 0.00 (checkpoint: service) |" in lines[5]
    assert lines[6].startswith("| get | 1,688 | 1,690 | 1,687 | 0.41 | 0.26 | 0.15 (≤ 0.30) "
                               "| 0.07: over | - |")
    assert lines[-1] == ("Within target at one rate: added CPU 3 of 3, Neo4j 2 of 3; in the "
                         "closed loop: added CPU 1 of 2, Neo4j 1 of 2.")
    # A side that answered under 97 % of the rate did not keep up: the report says so.
    result["workloads"]["get"]["at_one_rate"]["service"]["rps"] = 1245
    assert report.one_rate_table(result)[-1] == (
        "Fell behind the rate (answered under 97% of it): get (service 1,245 of 1,688 a "
        "second).")
    assert report.one_rate_table({"workloads": {"get": at(0.16, True, 0.01, True)}}) == []


def test_added_cpu_above_the_floor_is_given_for_each_workload_that_has_it():
    workloads = {"get": {"added_cpu_ms": 0.23}, "list": {"added_cpu_ms": 0.82},
                 "webhook_create": {"added_cpu_ms": None}, "proxy": {"available": False}}
    above_floor(workloads, 0.15)
    assert workloads["get"]["added_above_floor_ms"] == 0.08
    assert workloads["list"]["added_above_floor_ms"] == 0.67
    assert "added_above_floor_ms" not in workloads["webhook_create"]
    assert "added_above_floor_ms" not in workloads["proxy"]
    unmeasured = {"get": {"added_cpu_ms": 0.23}}
    above_floor(unmeasured, None)
    assert unmeasured == {"get": {"added_cpu_ms": 0.23}}


def test_the_floor_is_a_public_route_with_no_bare_side_and_not_a_table_workload():
    from bench.workloads import FLOOR, WORKLOADS, Request

    assert FLOOR.bare is None and FLOOR not in WORKLOADS
    assert FLOOR.name not in {w.name for w in WORKLOADS}
    assert [FLOOR.http(item) for item in FLOOR.items(None, None)] == [Request("GET", "/health")]


def test_the_report_prints_the_floor_and_what_each_workload_adds_above_it():
    from bench import report

    floor = {"title": "public route", "ms": 0.151, "rounds_ms": [0.149, 0.153],
             "service": {"rps": 9876.5, "errors": 0}}
    workloads = {"get": {"added_above_floor_ms": 0.079}, "list": {"added_above_floor_ms": 0.67},
                 "webhook_create": {}}
    lines = report.floor_lines({"http_floor": floor, "workloads": workloads})
    assert lines[1] == ("The HTTP floor (public route): 0.151 ms of the service's CPU a request "
                        "at 9,876 req/s (its rounds 0.149, 0.153). Added by the service above "
                        "it: get 0.08, list 0.67.")
    failed = {**floor, "ms": None, "service": {"rps": 0.0, "errors": 12}}
    assert report.floor_lines({"http_floor": failed, "workloads": {}})[1] == (
        "The HTTP floor (public route): not measured (12 requests failed).")
    assert report.floor_lines({"workloads": workloads}) == []


def test_rounds_of_one_side_combine_weighted_by_their_requests():
    from bench.stats import combined

    first = Result(requests=300, errors=0, seconds=10, p50_ms=10, p99_ms=40, p999_ms=90,
                   cpu_ms={"service": 1.0, "neo4j": 2.0}, audit_batch_mean=10.0, neo4j_tx=1.1,
                   stalls={"gc_pauses": 3})
    second = Result(requests=100, errors=2, seconds=10, p50_ms=30, p99_ms=60, p999_ms=70,
                    cpu_ms={"service": 2.0, "neo4j": 4.0, "receiver": 0.5},
                    audit_batch_mean=None, neo4j_tx=1.3)
    both = combined([first, second])
    assert (both.requests, both.errors, both.seconds) == (400, 2, 20)
    assert both.rps == pytest.approx(19.9)
    # CPU a request over both windows: the busier window weighs three times the other.
    assert both.cpu_ms == {"neo4j": 2.5, "receiver": 0.5, "service": 1.25}
    assert (both.audit_batch_mean, both.neo4j_tx) == (10.0, 1.15)
    assert (both.p50_ms, both.p99_ms, both.p999_ms) == (20, 50, 80)  # medians of the windows
    assert both.stalls is None  # a window's stalls stay with it
    assert combined([first]) is first


def _window(service_ms: float, neo4j_ms: float, client: bool = False,
            checkpoint: bool = False, running: bool = False) -> Result:
    return Result(requests=100, errors=0, seconds=1, p50_ms=1, p99_ms=1, p999_ms=1,
                  cpu_ms={"client" if client else "service": service_ms, "neo4j": neo4j_ms},
                  neo4j_background={"checkpoints": [{"ms": 4681, "pages": 87319}]
                                    if checkpoint else [], "checkpoint_running": running})


def test_neo4j_difference_is_also_given_over_the_rounds_without_a_checkpoint():
    from bench.stats import neo4j_added_outside_checkpoints

    services = [_window(0.7, 0.90), _window(0.7, 0.95)]
    bares = [_window(0.5, 1.40, client=True, checkpoint=True), _window(0.5, 0.85, client=True)]
    # The bare side's first window held a checkpoint: only the second round counts.
    assert neo4j_added_outside_checkpoints(services, bares) == {
        "rounds_with_checkpoint": 1, "neo4j_added_cpu_ms_outside_checkpoints": 0.1}
    clean = [_window(0.5, 0.85, client=True), _window(0.5, 0.85, client=True)]
    assert neo4j_added_outside_checkpoints(services, clean) == {"rounds_with_checkpoint": 0}
    spoilt = [_window(0.5, 1.4, client=True, checkpoint=True)] * 2
    assert neo4j_added_outside_checkpoints(services, spoilt) == {"rounds_with_checkpoint": 2}
    # One still running at the window's end costs it as much as one that ended in it.
    running = [_window(0.7, 1.50, running=True), _window(0.7, 0.95)]
    assert neo4j_added_outside_checkpoints(running, clean) == {
        "rounds_with_checkpoint": 1, "neo4j_added_cpu_ms_outside_checkpoints": 0.1}


def test_the_report_marks_the_rounds_holding_a_checkpoint():
    from bench import report

    rounds = [{"first": "service", "added_cpu_ms": 0.25, "neo4j_added_cpu_ms": -0.61,
               "service": {"neo4j_background": {"checkpoints": []}},
               "bare": {"neo4j_background": {"checkpoints": [{"ms": 5455}]}}},
              {"first": "bare", "added_cpu_ms": 0.20, "neo4j_added_cpu_ms": -0.10,
               "service": {"neo4j_background": None}, "bare": {}},
              {"first": "service", "added_cpu_ms": 0.21, "neo4j_added_cpu_ms": 0.30,
               "service": {"neo4j_background": {"checkpoints": [], "checkpoint_running": True}},
               "bare": {"neo4j_background": {"checkpoints": []}}}]
    notes = report.round_notes({"workloads": {"create": {
        "rounds": rounds, "rounds_with_checkpoint": 2,
        "neo4j_added_cpu_ms_outside_checkpoints": -0.10}}})
    assert notes == [
        "- create, round by round (first side; added by the service; added in Neo4j): "
        "service; 0.25; -0.61 (checkpoint: bare), bare; 0.20; -0.10, "
        "service; 0.21; 0.30 (checkpoint: service)",
        "- create: a checkpoint ran in 2 of 3 rounds; added in Neo4j over the others: -0.10"]


def test_the_report_lists_each_round_of_a_workload_measured_in_rounds():
    from bench import report

    rounds = [{"first": "service", "added_cpu_ms": 0.43, "neo4j_added_cpu_ms": 0.14},
              {"first": "bare", "added_cpu_ms": 0.05, "neo4j_added_cpu_ms": -0.32}]
    notes = report.round_notes({"workloads": {"update": {"rounds": rounds}, "get": {}}})
    assert notes == ["- update, round by round (first side; added by the service; added in "
                     "Neo4j): service; 0.43; 0.14, bare; 0.05; -0.32"]


def test_the_cpu_table_prints_what_the_service_adds_and_its_target():
    from bench import report

    cpu = {"service": {"cpu_ms": {"service": 0.9, "neo4j": 1.5, "neo4j_jit": 0.2}},
           "bare": {"cpu_ms": {"client": 0.5, "neo4j": 1.0, "neo4j_jit": 0.0}},
           "added_cpu_ms": 0.4, "added_cpu_target_ms": 0.3, "added_cpu_met": False,
           "neo4j_added_cpu_ms": 0.3}
    rows = report.cpu_table({"workloads": {"get": cpu}})
    assert any(r.startswith("| get | 0.90 | 1.50 | 0.20 | - | 0.50 | 1.00 | 0.00 | "
                            "0.40 (≤ 0.30: over) | 0.30 |") for r in rows)


def test_the_audit_trails_cost_is_on_against_off_and_printed_with_its_target():
    from bench import report

    def side(requests, cpu):
        return Result(requests=requests, errors=0, seconds=1, p50_ms=1, p99_ms=1, p999_ms=1,
                      cpu_ms=cpu)

    cost = audit_cost(side(800, {"service": 1.0, "neo4j": 0.9}),
                      side(1000, {"service": 0.8, "neo4j": 0.6}), 0.15)
    assert (cost["throughput_cost"], cost["met"]) == (0.2, False)
    assert (cost["service_cpu_ms_added"], cost["neo4j_cpu_ms_added"]) == (0.2, 0.3)
    assert audit_cost(side(900, None), side(1000, None), 0.15)["service_cpu_ms_added"] is None
    rows = report.audit_table({"audit_off": {"get": cost}})
    assert "| get | 800 | 1,000 | 20.0 % (≤ 15 %: over) | - | 0.20 | 0.30 |" in rows
    assert "then restarted without it" in rows[1]  # a record of one window each
    assert report.audit_table({}) == []


def test_the_audit_trails_rounds_are_summed_and_each_rounds_cost_kept():
    from bench import report

    def side(requests, service_cpu):
        return Result(requests=requests, errors=0, seconds=1, p50_ms=1, p99_ms=1, p999_ms=1,
                      cpu_ms={"service": service_cpu, "neo4j": 1.0})

    # Round one: the trail took 10 %; round two (the machine slower): 30 %.
    cost = audit_rounds([side(900, 1.0), side(700, 1.2)], [side(1000, 0.9), side(1000, 0.9)],
                        0.15)
    assert cost["rounds_throughput_cost"] == [0.1, 0.3]
    assert (cost["on"]["requests"], cost["off"]["requests"]) == (1600, 2000)
    assert (cost["throughput_cost"], cost["met"]) == (0.2, False)
    # the CPU a request weighted by each window's requests: (900 + 840) / 1600 against 0.9
    assert cost["service_cpu_ms_added"] == round(1740 / 1600 - 0.9, 3)
    rows = report.audit_table({"audit_off": {"create": cost}})
    assert "| create | 800 | 1,000 | 20.0 % (≤ 15 %: over) | 10.0 %, 30.0 % |" in rows[-1]
    assert "a second one beside it with the trail off, in turn" in rows[1]


@pytest.mark.parametrize("i", [0, 1, 7, 12345, 99_999, 10_000_001])
def test_loaded_cards_are_valid_cards(i):
    assert luhn_valid(card_number(i))
    assert get_type("card").validate(card_data(i)) == {}


def test_customer_filter_matches_one_page():
    owners = [card_metadata(i)["customer_id"] for i in range(3 * PER_CUSTOMER)]
    assert owners.count(customer(1)) == PER_CUSTOMER


def test_cpu_snapshot_counts_a_tree_and_leaves_out_a_named_subtree():
    import os
    import subprocess
    import sys

    from bench import cpu

    # A child that burns CPU when told, says when it is done, and stays alive until closed.
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys\nsys.stdin.read(1)\nx = 0\n"
         "for i in range(10**7): x += i\nprint('done', flush=True)\nsys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    with child:
        groups = {"child": child.pid, "self": os.getpid()}
        before = cpu.snapshot(groups)
        child.stdin.write("go")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"  # this process blocks meanwhile
        after = cpu.snapshot(groups)
        child.kill()
    spent = cpu.per_request(before, after, 1)
    assert spent["child"] >= 10 * cpu.TICK_MS  # ten million additions take well over 0.1 s
    assert spent["self"] < spent["child"] / 2  # the child's ticks are not counted in "self"
    assert cpu.per_request(before, after, 0) == {"child": None, "self": None}


def test_cpu_snapshot_counts_the_load_generators_ended_children():
    import os
    import subprocess
    import sys

    from bench import cpu

    # A load generator like wrk: a child that works and is gone (waited for) by the window's end.
    before = cpu.snapshot({"loadgen": os.getpid()})
    subprocess.run([sys.executable, "-c", "x = 0\nfor i in range(10**7): x += i\n"], check=True)
    after = cpu.snapshot({"loadgen": os.getpid()})
    assert cpu.per_request(before, after, 1)["loadgen"] >= 10 * cpu.TICK_MS
    # Any other group's ended children are not its: it counts the tree alive now.
    before = cpu.snapshot({"self": os.getpid()})
    subprocess.run([sys.executable, "-c", "x = 0\nfor i in range(10**7): x += i\n"], check=True)
    after = cpu.snapshot({"self": os.getpid()})
    assert cpu.per_request(before, after, 1)["self"] < 10 * cpu.TICK_MS


def test_cpu_snapshot_counts_user_or_system_time_alone_when_asked():
    import os
    import subprocess
    import sys

    from bench import cpu

    def spent(code: str) -> dict[str, float]:
        parts = {}
        before = {part: cpu.snapshot({"loadgen": os.getpid()}, part) for part in cpu.PARTS}
        subprocess.run([sys.executable, "-c", code], check=True)
        for part in cpu.PARTS:
            after = cpu.snapshot({"loadgen": os.getpid()}, part)
            parts[part] = cpu.per_request(before[part], after, 1)["loadgen"]
        return parts

    # Ten million additions are the process's own work; 128 MiB from the kernel's random
    # generator (getrandom), the kernel's.
    adding = spent("x = 0\nfor i in range(10**7): x += i\n")
    assert adding["user"] >= 10 * cpu.TICK_MS > adding["system"]
    drawing = spent("import os\nfor _ in range(8): os.urandom(1 << 24)\n")
    assert drawing["system"] >= 10 * cpu.TICK_MS > drawing["user"]
    for both in (adding, drawing):  # this process's own ticks between the reads apart
        assert abs(both["all"] - (both["user"] + both["system"])) <= 5 * cpu.TICK_MS


def test_plans_walk_sums_db_hits_over_the_tree_and_names_the_costliest_operators():
    from collections import Counter

    from bench.plans import _walk

    plan = {"operatorType": "ProduceResults@neo4j", "dbHits": 0, "rows": 50, "children": [
        {"operatorType": "Projection@neo4j", "dbHits": 700, "rows": 50, "children": [
            {"operatorType": "Filter@neo4j", "dbHits": 200, "rows": 50, "children": [
                {"operatorType": "NodeIndexSeek@neo4j", "dbHits": 51, "rows": 51}]}]}]}
    ops: Counter = Counter()
    assert _walk(plan, ops) == (951, 50)
    assert ops.most_common(2) == [("Projection", 700), ("Filter", 200)]


def test_jfr_names_the_innermost_cost_centre():
    from bench.jfr import _centre

    planning = ["org.neo4j.cypher.internal.frontend.phases.Phase.apply",
                "org.neo4j.cypher.internal.runtime.slotted.Pipe.run",
                "org.neo4j.bolt.protocol.Connection.run"]
    store = ["java.util.HashMap.get", "org.neo4j.io.pagecache.PageCursor.next",
             "org.neo4j.bolt.protocol.Connection.run"]
    assert _centre(planning) == "planning (cache miss)"
    assert _centre(store) == "store reads"
    assert _centre(["java.lang.Thread.run"]) == "other"


def _jfr_event(start: str, thread: str, *frames: str) -> dict:
    return {"values": {"startTime": start, "sampledThread": {"javaName": thread},
                       "stackTrace": {"frames": [
                           {"method": {"type": {"name": f.rsplit(".", 1)[0].replace(".", "/")},
                                       "name": f.rsplit(".", 1)[1]}} for f in frames]}}}


def test_jfr_keeps_a_windows_samples_alone():
    from datetime import UTC, datetime

    from bench.jfr import _centre, within

    seek = ("org.neo4j.index.internal.gbptree.SeekCursor.next",
            "org.neo4j.bolt.protocol.Connection.run")
    events = [
        _jfr_event("2026-12-04T12:00:04.999999999Z", "neo4j.BoltWorker-3", *seek),
        _jfr_event("2026-12-04T12:00:05.000000500Z", "neo4j.BoltWorker-3", *seek),
        _jfr_event("2026-12-04T13:00:09.25+01:00", "neo4j.BoltWorker-4", *seek),
        {"values": {"startTime": "2026-12-04T12:00:06Z", "stackTrace": None}},  # no stack
        _jfr_event("2026-12-04T12:00:10.000001Z", "neo4j.BoltWorker-3", *seek),
    ]
    begin = datetime(2026, 12, 4, 12, 0, 5, tzinfo=UTC)
    end = datetime(2026, 12, 4, 12, 0, 10, tzinfo=UTC)
    kept = within(events, begin, end)
    assert [thread for thread, _ in kept] == ["neo4j.BoltWorker-3", "neo4j.BoltWorker-4"]
    assert kept[0][1] == list(seek)  # JFR's org/neo4j/... as the markers name it
    assert _centre(kept[0][1]) == "indexes: seeks and updates"


def test_jfr_tally_shares_samples_by_centre_method_and_thread_kind():
    from bench.jfr import tally

    store = ["java.util.HashMap.get", "org.neo4j.io.pagecache.PageCursor.next"]
    bolt = ["org.neo4j.bolt.protocol.Connection.run"]
    taken = [("neo4j.BoltWorker-1", store), ("neo4j.BoltWorker-2", store),
             ("neo4j.BoltWorker-2", store), ("neo4j.BoltNetworkIO-1", bolt)]
    summary = tally(taken)
    assert summary["samples"] == 4
    assert summary["by_centre_pct"] == [("store reads", 75.0), ("bolt protocol + network", 25.0)]
    assert summary["innermost_neo4j_method_pct"][0] == (
        "org.neo4j.io.pagecache.PageCursor.next", 75.0)
    assert summary["threads_pct"] == [("neo4j.BoltWorker", 75.0), ("neo4j.BoltNetworkIO", 25.0)]
    assert tally([])["by_centre_pct"] == []


def test_report_names_the_jvm_warm_up_only_when_there_was_one():
    from bench.report import jvm_line

    assert jvm_line(None) == ""
    assert jvm_line({"seconds": 0, "rounds": 0, "jit_cores_last_round": None}) == ""
    line = jvm_line({"seconds": 121, "rounds": 9, "jit_cores_last_round": 0.04})
    assert "121s" in line and "9 rounds" in line and "0.04 of a core" in line


def test_a_profile_is_kept_gzipped_and_still_summarised(tmp_path):
    from bench import profile

    raw = tmp_path / "list.collapsed.txt"
    raw.write_text("process 1;run (vaultgraph/server.py:1);present (vaultgraph/view.py:9) 3\n"
                   "process 1;run (vaultgraph/server.py:1);recv (neo4j/_io.py:5) 1\n")
    summary = profile.summarize(raw)
    kept = profile.compress(raw)
    assert not raw.exists() and kept.name == "list.collapsed.txt.gz"
    assert gzip.decompress(kept.read_bytes()).decode().count("\n") == 2
    assert summary["samples"] == 4
    assert dict(summary["self_by_category_pct"]) == {"vaultgraph": 75.0, "neo4j driver": 25.0}


def test_a_profile_under_load_gives_each_side_s_cpu_a_request_and_their_difference(tmp_path):
    from bench import profile

    service, bare = tmp_path / "s.txt", tmp_path / "b.txt"
    # The kernel's CPU a request, split in the samples' shares (3:2 and all one).
    service.write_text("process 1;thread 2;run (vaultgraph/server.py:1);"
                       "_handle (aiohttp/web_app.py:5) 300\n"
                       "process 1;run (vaultgraph/server.py:1);recv (neo4j/_io.py:5) 200\n")
    bare.write_text("process 9;op (bench/workloads.py:3);recv (neo4j/_io.py:5) 250\n")
    s_ms = profile.cpu_per_request(service, 2.0)
    b_ms = profile.cpu_per_request(bare, 1.0)
    assert s_ms["category"] == pytest.approx({"aiohttp": 1.2, "neo4j driver": 0.8})
    assert s_ms["function"]["_handle (aiohttp/web_app.py)"] == pytest.approx(1.2)
    added = profile.difference(s_ms, b_ms)
    assert (added["service_ms"], added["bare_ms"]) == (2.0, 1.0)
    assert added["by_category_ms"] == [("aiohttp", 1.2), ("neo4j driver", -0.2)]
    assert added["by_function_ms"][0] == ("_handle (aiohttp/web_app.py)", 1.2)


def _samples(rss: list[float]) -> list[dict]:
    return [{"service_rss_mib": v} for v in rss]


def test_soak_verdict_sees_a_climb_and_forgives_a_settling():
    from bench.memory import soak_verdict

    settled = soak_verdict(_samples([80, 95, 100, 101, 100, 102, 101, 101]))
    assert settled["grew"] is False and settled["early_mib"] == 100.5
    climbing = soak_verdict(_samples([100 + 10 * i for i in range(8)]))
    assert climbing["grew"] is True and climbing["growth_mib"] == 40.0
    # the allowance is the larger of 8 MiB and 3 % of the early figure
    assert soak_verdict(_samples([1000] * 4 + [1025] * 4))["grew"] is False
    assert soak_verdict(_samples([1000] * 4 + [1035] * 4))["grew"] is True
    assert soak_verdict(_samples([100] * 7))["grew"] is None


def test_hit_ratio_and_store_size(tmp_path):
    from bench.memory import hit_ratio, store_bytes

    assert hit_ratio(3, 1) == {"hits": 3, "faults": 1, "hit_ratio": 0.75}
    assert hit_ratio(0, 0)["hit_ratio"] is None
    store = tmp_path / "data" / "databases" / "neo4j" / "schema"
    store.mkdir(parents=True)
    (store / "index").write_bytes(b"x" * 100)
    (store.parent / "neostore").write_bytes(b"x" * 20)
    (tmp_path / "data" / "transactions" / "neo4j").mkdir(parents=True)
    (tmp_path / "data" / "transactions" / "neo4j" / "neostore.transaction.db.0").write_bytes(b"x")
    assert store_bytes(tmp_path) == {"store": 120, "transaction_logs": 1}
    assert store_bytes(tmp_path / "absent") == {"store": 0, "transaction_logs": 0}


def test_resident_set_of_a_process_tree_counts_its_children():
    import os
    import subprocess

    from bench.cpu import process_tree
    from bench.memory import rss_bytes, tree_rss_bytes

    child = subprocess.Popen([sys.executable, "-c", "import time; print(1, flush=True); "
                              "time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        child.stdout.readline()  # started and sleeping: its resident set holds still
        assert child.pid in process_tree(os.getpid())
        leaf = rss_bytes(child.pid)
        assert leaf > 0
        assert abs(tree_rss_bytes(child.pid) - leaf) < 1024 * 1024  # a leaf: itself only
        assert tree_rss_bytes(os.getpid()) > leaf
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert rss_bytes(child.pid) == 0
    assert tree_rss_bytes(None) == 0


MACHINE = {"nproc": 2, "cpu_model": "x", "mem_gib": 1.0, "python": "3.11", "loadavg_at_start": []}
MEM = {"service_rss_mib": 101.5, "neo4j_rss_mib": 900.0,
       "neo4j_heap_mib": {"used": 300.0, "committed": 512.0, "max": 512.0},
       "neo4j_pagecache": "1g"}
SIDE = {"rps": 10.0, "p50_ms": 1.0, "p99_ms": 2.0, "p999_ms": 3.0, "errors": 0}


def test_the_reports_print_the_memory_figures():
    from bench import report

    head = {"machine": MACHINE, "loadgen": "wrk", "git_sha": "abc", "date": "today"}
    run = {**head, "stored_tokens": 5, "workloads": {
        "get": {"service": SIDE, "bare": SIDE, "ratio": 1.0, "service_rss_mib_after": 120.25}},
        "settings": {"concurrency": 1, "warmup_s": 1, "duration_s": 1},
        "memory_at_rest": MEM, "memory_at_end": MEM}
    text = report.table(run)
    assert "at rest 101.5; after each workload: get 120.25" in text
    assert "heap 300.0 MiB used of 512.0, page cache 1g" in text
    soak = {**head, "samples": [{"seconds": 15, "requests": 150, "rps": 10.0, "p50_ms": 1.0,
                                 "p99_ms": 2.0, "errors": 0, "service_rss_mib": 100.0,
                                 "neo4j_heap_used_mib": 300.0}] * 8}
    soak["verdict"] = {"early_mib": 100.0, "late_mib": 100.0, "growth_mib": 0.0,
                       "allowed_mib": 8.0, "grew": False}
    assert "(+0.0 MiB, allowed 8.0): no growth" in report.soak_table(soak)
    row = {"load_seconds": 7, "audit_events": 9, "memory": MEM,
           **{n: {**SIDE, "page_cache": {"hit_ratio": 0.5}} for n in ("get", "list")}}
    scale = {**head, "sizes": {"10": row, "20": row}, "p50_growth": {"get": 1.0, "list": 1.0},
             "p50_growth_between": [10, 20], "disk_mib": {"store": 1.5, "transaction_logs": 2.0}}
    text = report.scale_table(scale)
    assert "| 20 | 7 | 9 | 300.0 | 900.0 | 101.5 | get 0.5, list 0.5 |" in text
    assert "store 1.5 MiB, transaction logs 2.0 MiB" in text


# Lines as Neo4j 5.26 writes them to debug.log (ids shortened; the system database's and the
# measured database's checkpoints interleave).
DEBUG_LOG = [
    '2026-11-25 02:09:40.100+0000 INFO  [o.n.c.i.c.CypherQueryCaches] [neo4j/f4d59be7] '
    "Discarded stale query from the query cache after 11 seconds. Reason: NodesAllCardinality "
    "changed from 100005.0 to 338627.0, which is a divergence of 0.70",
    '2026-11-25 02:09:47.239+0000 INFO  [o.n.k.i.t.l.c.CheckPointerImpl] [neo4j/f4d59be7] '
    'Checkpoint triggered by "Scheduled checkpoint for every 100000 log chunks threshold" @ '
    "txId: 105976, append index: 105966 checkpoint started...",
    '2026-11-25 02:09:47.300+0000 INFO  [o.n.k.i.t.l.c.CheckPointerImpl] [system/00000000] '
    'Checkpoint triggered by "Database shutdown" @ txId: 42, append index: 42 checkpoint '
    "completed in 18ms. Checkpoint flushed 75 pages (0% of total available pages), in 75 IOs.",
    '2026-11-25 02:09:51.855+0000 INFO  [o.n.k.i.t.l.c.CheckPointerImpl] [neo4j/f4d59be7] '
    'Checkpoint triggered by "Scheduled checkpoint for every 100000 log chunks threshold" @ '
    "txId: 105976, append index: 105966 checkpoint completed in 4s 616ms. Checkpoint flushed "
    "80654 pages (61% of total available pages), in 73766 IOs. Checkpoint performed with IO "
    "limit: unlimited, paused in total 0 times( 0 millis).",
    '2026-11-25 02:09:52.000+0000 INFO  [o.n.k.i.t.l.c.CheckPointerImpl] [neo4j/f4d59be7] '
    'Checkpoint triggered by "Scheduled checkpoint for time threshold" @ txId: 106000, append '
    "index: 106000 checkpoint started...",
]


def test_neo4j_durations_are_read_in_milliseconds():
    from bench.neo4j_log import duration_ms

    assert duration_ms("4s 616ms") == 4616
    assert duration_ms("18ms") == 18
    assert duration_ms("1m 2s") == 62_000


def test_a_window_names_its_checkpoints_and_discarded_plans(tmp_path):
    from bench.neo4j_log import DebugLog, describe

    log = DebugLog(tmp_path / "debug.log")
    assert log.mark() == 0 and log.since(0)["checkpoints"] == []  # not written yet
    (tmp_path / "debug.log").write_text("old line [neo4j/x] Discarded stale query from the "
                                        "query cache\n")
    mark = log.mark()
    with (tmp_path / "debug.log").open("a") as f:
        f.write("\n".join(DEBUG_LOG) + "\n")
    window = log.since(mark)
    # the system database's checkpoint is not the measured database's; the line before the
    # mark is not the window's
    assert window == {
        "checkpoints": [{"reason": "Scheduled checkpoint for every 100000 log chunks threshold",
                         "ms": 4616, "pages": 80654}],
        "checkpoint_running": True, "plans_discarded": 1}
    assert describe(window) == ("checkpoint 4.6 s (80,654 pages), a checkpoint still running "
                                "at the end, 1 cached plan discarded")
    assert describe({"checkpoints": [], "checkpoint_running": False, "plans_discarded": 0}) == ""
    assert describe(None) == ""


def test_the_report_says_what_neo4j_did_during_a_window():
    from bench import report

    busy = {**SIDE, "neo4j_background": {"checkpoints": [], "checkpoint_running": False,
                                         "plans_discarded": 3}}
    run = {"machine": MACHINE, "loadgen": "wrk", "git_sha": "abc", "date": "today",
           "stored_tokens": 5, "settings": {"concurrency": 1, "warmup_s": 1, "duration_s": 1},
           "workloads": {"get": {"service": SIDE, "bare": busy, "ratio": 1.0}}}
    text = report.table(run)
    assert "- get (bare): Neo4j in the background during the window: 3 cached plans discarded" \
        in text
    assert "get (service)" not in text


# Neo4j's gc.log as its JVM writes it (-Xlog:gc,safepoint with uptime, level and tags).
GC_LOG = [
    '[812.399s][info][safepoint] Safepoint "G1CollectForAllocation", Time since last: '
    '363172316 ns, Reaching safepoint: 4374 ns, Cleanup: 58387 ns, At safepoint: 5680290 ns, '
    'Total: 5743051 ns',
    "[812.399s][info][gc       ] GC(40) Pause Young (Normal) (G1 Evacuation Pause) "
    "600M->310M(1024M) 5.609ms",
    '[813.001s][info][safepoint] Safepoint "Cleanup", Time since last: 601000000 ns, Reaching '
    "safepoint: 3072 ns, Cleanup: 29926 ns, At safepoint: 1433 ns, Total: 34431 ns",
    '[813.700s][info][safepoint] Safepoint "G1CollectForAllocation", Time since last: '
    "698000000 ns, Reaching safepoint: 3546 ns, Cleanup: 120661 ns, At safepoint: 301974182 ns, "
    "Total: 302098389 ns",
]


def test_a_window_counts_the_jvm_stops_after_its_mark(tmp_path):
    from bench.neo4j_log import PauseLog, describe_jvm

    path = tmp_path / "gc.log"
    log = PauseLog(path)
    assert log.since(log.mark())["jvm_stops"] == 0  # not written yet
    path.write_text(GC_LOG[0] + "\n")
    mark = log.mark()
    with path.open("a") as f:
        f.write("\n".join(GC_LOG[1:]) + "\n")
    window = log.since(mark)
    assert window == {"jvm_stops": 2, "jvm_stopped_ms": 302.1, "jvm_longest_ms": 302.1,
                      "jvm_longest": "G1CollectForAllocation"}
    assert describe_jvm(window) == ("the JVM stopped all threads for 302.1 ms "
                                    "(G1CollectForAllocation; 2 stops, 302.1 ms in all)")
    assert describe_jvm(log.since(0) | {"jvm_longest_ms": 5.7}) == ""  # nothing notable
    path.write_text(GC_LOG[2] + "\n")  # rotated: shorter than the mark, read from its start
    assert log.since(mark)["jvm_stops"] == 1


def _stall_exposition(lag_count, lag_le_50ms, lag_le_250ms, gc_count, gc_le_25ms, gc_sum,
                      commits=(0, 0), commit_sum=0.5):
    lines = ["# TYPE vaultgraph_audit_commit_seconds histogram",
             f'vaultgraph_audit_commit_seconds_bucket{{le="0.05"}} {commits[1]}',
             f'vaultgraph_audit_commit_seconds_bucket{{le="+Inf"}} {commits[0]}',
             f"vaultgraph_audit_commit_seconds_count {commits[0]}",
             f"vaultgraph_audit_commit_seconds_sum {commit_sum}",
             "# TYPE vaultgraph_event_loop_lag_seconds histogram"]
    for le, n in (("0.05", lag_le_50ms), ("0.25", lag_le_250ms), ("+Inf", lag_count)):
        lines.append(f'vaultgraph_event_loop_lag_seconds_bucket{{le="{le}"}} {n}')
    lines += [f"vaultgraph_event_loop_lag_seconds_count {lag_count}",
              "vaultgraph_event_loop_lag_seconds_sum 1.0",
              "# TYPE vaultgraph_python_gc_pause_seconds histogram"]
    for gen in ("0", "2"):
        lines += [f'vaultgraph_python_gc_pause_seconds_bucket{{generation="{gen}",le="0.025"}} '
                  f"{gc_le_25ms[gen]}",
                  f'vaultgraph_python_gc_pause_seconds_bucket{{generation="{gen}",le="+Inf"}} '
                  f"{gc_count[gen]}",
                  f'vaultgraph_python_gc_pause_seconds_count{{generation="{gen}"}} '
                  f"{gc_count[gen]}",
                  f'vaultgraph_python_gc_pause_seconds_sum{{generation="{gen}"}} {gc_sum[gen]}']
    return "\n".join(lines) + "\n"


def test_a_window_counts_its_process_stalls_from_two_scrapes():
    from bench.stalls import between, describe, from_exposition

    before = from_exposition(_stall_exposition(10, 10, 10, {"0": 5, "2": 0}, {"0": 5, "2": 0},
                                               {"0": 0.01, "2": 0.0}, commits=(100, 100)))
    after = from_exposition(_stall_exposition(160, 157, 159, {"0": 52, "2": 1},
                                              {"0": 50, "2": 0}, {"0": 0.31, "2": 0.04},
                                              commits=(400, 398), commit_sum=2.0))
    window = between(before, after)
    assert window == {"loop_ticks": 150, "loop_late_over_50ms": 3, "loop_late_over_250ms": 1,
                      "gc_pauses": 48, "gc_ms": 340.0, "gc_over_25ms": 3,
                      "audit_commits": 300, "audit_commits_over_50ms": 2,
                      "audit_commit_mean_ms": 5.0,
                      "gc_by_generation": {"0": {"pauses": 47, "ms": 300.0},
                                           "2": {"pauses": 1, "ms": 40.0}}}
    assert describe(window) == ("event loop late over 50 ms 3 times (1 over 250 ms); 3 "
                                "collections over 25 ms (of 48, 340 ms in all); 2 audit group "
                                "commits over 50 ms (of 300)")
    quiet = {**window, "loop_late_over_50ms": 0, "loop_late_over_250ms": 0, "gc_over_25ms": 0,
             "audit_commits_over_50ms": 0}
    assert describe(quiet) == ""


def test_the_report_names_a_sides_stalls():
    from bench import report

    stalled = {**SIDE, "stalls": {"loop_ticks": 150, "loop_late_over_50ms": 1,
                                  "loop_late_over_250ms": 0, "gc_pauses": 40, "gc_ms": 200,
                                  "gc_over_25ms": 0},
               "neo4j_background": {"jvm_stops": 3, "jvm_stopped_ms": 320.0,
                                    "jvm_longest_ms": 300.0,
                                    "jvm_longest": "G1CollectForAllocation"}}
    run = {"machine": MACHINE, "loadgen": "wrk", "git_sha": "abc", "date": "today",
           "stored_tokens": 5, "settings": {"concurrency": 1, "warmup_s": 1, "duration_s": 1},
           "workloads": {"get": {"service": stalled, "bare": SIDE, "ratio": 1.0}}}
    text = report.table(run)
    assert ("- get (service): the JVM stopped all threads for 300 ms (G1CollectForAllocation; "
            "3 stops, 320 ms in all); the service's event loop late over 50 ms 1 time") in text
    assert "get (bare)" not in text


def test_a_window_reads_its_audit_batch_mean_from_the_same_scrapes():
    from bench.stalls import batch_mean, from_exposition

    def scrape(batches, events):
        return from_exposition("# TYPE vaultgraph_audit_batches counter\n"
                               f"vaultgraph_audit_batches_total {batches}\n"
                               "# TYPE vaultgraph_audit_events counter\n"
                               f"vaultgraph_audit_events_total {events}\n")

    assert batch_mean(scrape(10, 200), scrape(30, 650)) == 22.5
    assert batch_mean(scrape(10, 200), scrape(10, 200)) is None  # no batch in the window

def test_the_bare_clients_audit_writer_follows_the_services_environment():
    env = {"VAULTGRAPH_AUDIT_BATCH_WAIT": "0.002", "VAULTGRAPH_AUDIT_BATCH_MAX": "64",
           "VAULTGRAPH_GC_YOUNG_THRESHOLD": "5000", "VAULTGRAPH_WORKERS": "2"}
    settings = bare_settings(env)
    assert settings.audit_batch_wait == 0.002
    assert settings.audit_batch_max == 64
    assert settings.gc_young_threshold == 5000
    # One process, whatever the service's worker count: two lanes, as a single process has.
    assert settings.worker_count == 1
    assert settings.audit_lane_count == 2
    assert bare_settings({"VAULTGRAPH_AUDIT_LANES": "3"}).audit_lane_count == 3


def test_without_settings_the_bare_client_has_the_services_defaults():
    settings, defaults = bare_settings({}), Settings()
    assert (settings.audit_batch_wait, settings.audit_batch_max, settings.audit_lane_count) == (
        defaults.audit_batch_wait, defaults.audit_batch_max, 2)


def test_the_bare_client_runs_on_the_event_loop_the_service_serves_on(monkeypatch):
    import asyncio

    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    monkeypatch.delenv("VAULTGRAPH_EVENT_LOOP", raising=False)
    assert on_service_loop(loop_module()).startswith("uvloop")  # the service's default
    monkeypatch.setenv("VAULTGRAPH_EVENT_LOOP", "asyncio")
    assert on_service_loop(loop_module()).startswith("asyncio")


def test_a_workload_settles_when_neo4j_cost_stops_moving():
    assert not settled(None, 1.0)  # one pair: nothing to compare with
    assert not settled(1.0, None)  # a pair that answered nothing
    assert not settled(0.0, 0.0)
    assert not settled(18.7, 9.4)  # tokenize's first pairs after the searches
    assert not settled(5.0, 5.6)
    assert settled(5.0, 5.4)
    assert settled(5.0, 4.6)
    assert settled(5.0, 5.6, tolerance=0.2)


def test_neo4j_cpu_is_sorted_by_what_its_threads_are_named():
    from bench import cpu

    pid = os.getpid()
    comm = Path(f"/proc/{pid}/comm").read_text().strip()  # the main thread's name
    before = cpu.threads(pid)
    sum(i * i for i in range(400_000))  # CPU enough for a tick or more
    after = cpu.threads(pid)
    assert after.each[pid][0] == comm and after.each[pid][1] > 0
    whole = after.since(before)  # by Neo4j's kinds: this process's threads are all `other`
    assert set(whole) == {*cpu.NEO4J_THREADS, "other", "ended"}
    assert whole["other"] > 0
    assert all(ticks == 0 for kind, ticks in whole.items() if kind not in ("other", "ended"))
    mine = after.since(before, {"main": (comm,)})
    assert set(mine) == {"main", "other", "ended"}
    assert 0 < mine["main"] <= whole["other"]
    assert cpu.threads(None) == cpu.Threads()
    assert cpu.threads(None).since(cpu.Threads()) == dict.fromkeys(whole, 0)


def test_a_thread_that_ends_in_the_window_never_takes_cpu_away():
    """Neo4j's idle pool threads end and new ones start: a sum over the threads alive at each
    end went below nought (a proxy window's Bolt workers once read -7.7 ms a request)."""
    import threading

    from bench import cpu

    started, go = threading.Event(), threading.Event()

    def burn():
        sum(i * i for i in range(300_000))
        started.set()
        go.wait()
        sum(i * i for i in range(1_500_000))

    pid = os.getpid()
    worker = threading.Thread(target=burn)
    worker.start()
    started.wait()
    before = cpu.threads(pid)
    go.set()
    worker.join()  # it spent CPU on both sides of `before`, then ended
    # join() returns as the thread finishes its Python work, a moment before the kernel
    # removes its task: wait for that (at most 5 s), as a window's end would come later.
    task = Path(f"/proc/{pid}/task/{worker.native_id}")
    for _ in range(500):
        if not task.exists():
            break
        time.sleep(0.01)
    after = cpu.threads(pid)
    spent = after.since(before)
    assert worker.native_id in before.each and worker.native_id not in after.each
    assert all(ticks >= 0 for ticks in spent.values())
    assert spent["ended"] > 0  # what it spent after `before`, kind unknown
    assert sum(spent.values()) == after.total - before.total


def test_threads_are_compared_by_id_and_name():
    from bench import cpu

    kinds = {"bolt": ("Bolt",), "jit": ("C2",)}
    before = cpu.Threads(total=100, each={1: ("Bolt-1", 40), 2: ("C2 Compiler", 30),
                                          3: ("Bolt-2", 20)})
    # 2 ended after spending 5 more; 3's id came back as another thread; 4 is new.
    after = cpu.Threads(total=100 + 10 + 5 + 7 + 3,
                        each={1: ("Bolt-1", 50), 3: ("C2 Compiler", 7), 4: ("Bolt-3", 3)})
    assert after.since(before, kinds) == {"bolt": 13, "jit": 7, "other": 0, "ended": 5}
    # A total that reads a tick behind its threads' (read at slightly different moments).
    behind = cpu.Threads(total=before.total + 9, each={1: ("Bolt-1", 50)})
    assert behind.since(before, kinds)["ended"] == 0



def test_rounds_run_until_their_figure_settles_or_the_time_is_up():
    import asyncio
    import itertools

    from bench.run import rounds_until

    figures = itertools.chain([18.6, 7.5, 6.5, 6.4], itertools.repeat(6.4))

    async def one_round(n: int) -> float:
        await asyncio.sleep(0.01)
        return next(figures)

    def close(costs: list) -> bool:
        return len(costs) > 1 and settled(costs[-2], costs[-1])

    def told(n: int, cost: float) -> str:
        return f"round {n}: {cost}"

    # tokenize's settling in the record: 6.5 is not within 10 % of 7.5, 6.4 is of 6.5.
    got, seconds, done = asyncio.run(rounds_until(60, one_round, close, told))
    assert (got, done) == ([18.6, 7.5, 6.5, 6.4], True)
    assert 0.04 <= seconds < 60
    assert asyncio.run(rounds_until(0, one_round, close, told))[::2] == ([], False)
    got, seconds, done = asyncio.run(rounds_until(0.05, one_round, lambda _: False, told))
    assert not done and 1 <= len(got) <= 6 and seconds >= 0.05


def test_an_empty_audit_off_setting_skips_the_comparison_and_other_empty_settings_keep_defaults():
    from bench.config import BenchConfig

    assert BenchConfig.from_env({}).audit_off_workloads() == ["create", "get"]
    empty = BenchConfig.from_env({"BENCH_AUDIT_OFF": "", "BENCH_LOADGEN": ""})
    assert empty.audit_off_workloads() == []
    assert empty.loadgen == "wrk"


def test_a_workload_is_measured_again_with_both_sides_at_one_rate(monkeypatch):
    """`Bench.workload` with its sides stubbed: the closed loop's rounds, then as many with
    both sides at half the slower side's closed-loop rate; none for a workload at a fixed
    rate."""
    import asyncio
    import types

    import bench.run as run
    from bench.config import BenchConfig
    from bench.workloads import WORKLOADS

    update = next(w for w in WORKLOADS if w.name == "update")
    asked: list[tuple[str, float]] = []

    def bench(**settings):
        b = run.Bench.__new__(run.Bench)
        b.cfg = BenchConfig(rounds=2, **{"one_rate": 0.75, **settings})
        b.service = types.SimpleNamespace(url="http://service", pid=os.getpid())
        b.tenant = types.SimpleNamespace(app_key="key")
        b.loadgen = types.SimpleNamespace(name="wrk")
        b.jfr, b.windows = None, {}
        b.context = lambda: types.SimpleNamespace(ids=["t-1", "t-2"])

        async def settle(w, ctx):
            return {}

        def side(name, rps_closed, cpu):
            async def measure(w, ctx, rng, *, rate=None):
                rate = b.rate(w) if rate is None else rate
                asked.append((name, rate))
                rps = rate or rps_closed  # a side keeps up with any rate asked
                return Result(requests=int(rps * 10), errors=0, seconds=10, p50_ms=1,
                              p99_ms=2, p999_ms=3, cpu_ms={**cpu, "neo4j": 1.0 + rate / 1e4})
            return measure

        b.settle_workload = settle
        b.service_side = side("service", 503.1, {"service": 1.6})
        b.bare_side = side("bare", 587.2, {"client": 1.3})
        return b

    monkeypatch.setattr(run, "probe", lambda url, key, request: (200, {}))
    entry = asyncio.run(bench().workload(update))
    assert asked == [("service", 0), ("bare", 0), ("bare", 0), ("service", 0),
                     ("service", 377.0), ("bare", 377.0), ("bare", 377.0), ("service", 377.0)]
    # The closed loop's figures as before, and the one-rate ones beside them.
    assert entry["service"]["rps"] == 503.1 and len(entry["rounds"]) == 2
    assert entry["added_cpu_ms"] == 0.3 and entry["added_cpu_met"] is True
    one = entry["at_one_rate"]
    assert one["rate"] == 377.0 and one["service"]["rps"] == one["bare"]["rps"] == 377.0
    assert [r["first"] for r in one["rounds"]] == ["service", "bare"]
    assert one["added_cpu_ms"] == 0.3 and one["neo4j_added_cpu_ms"] == 0.0
    assert entry["service_rss_mib_after"] > 0

    asked.clear()
    entry = asyncio.run(bench(fixed_rate=400).workload(update))
    assert {rate for _, rate in asked} == {400}
    assert len(asked) == 4 and "at_one_rate" not in entry
    asked.clear()
    entry = asyncio.run(bench(one_rate=0).workload(update))
    assert len(asked) == 4 and "at_one_rate" not in entry
