"""bench/defaults_ab.py's own logic: which variants run, in which order, what each changes,
what the summary reports; and the wrk summary line both wrk scripts print."""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.defaults_ab import (
    DEFAULTS,
    VARIANTS,
    Harness,
    Neo4jStack,
    Output,
    ServiceProcess,
    Settings,
    baseline,
    interpreters,
    rotated,
    select,
    summarize,
    table,
)
from bench.loadgen import parse_wrk
from vaultgraph.settings import Settings as ServiceSettings


def test_defaults_are_the_settings_defaults_make_run_uses():
    service = ServiceSettings()
    assert (DEFAULTS.heap, DEFAULTS.pagecache) == (service.neo4j_heap, service.neo4j_pagecache)
    assert DEFAULTS.workers == 0  # make run: --workers ${VAULTGRAPH_WORKERS:-0}
    assert (DEFAULTS.output, DEFAULTS.threads, DEFAULTS.load) == ("terminal", 2, "each")


@pytest.mark.parametrize("name", [n for n in VARIANTS if n not in ("defaults", "bench-setup")])
def test_each_variant_changes_exactly_one_thing(name):
    fields = ("heap", "pagecache", "large", "workers", "output", "settings", "threads", "load")
    changed = [f for f in fields if getattr(VARIANTS[name], f) != getattr(DEFAULTS, f)]
    # The Neo4j memory is one change made of two settings.
    assert changed in (["heap", "pagecache"], [changed[0]]) and changed


def test_bench_setup_is_the_benchmarks_configuration():
    v = VARIANTS["bench-setup"]
    assert (v.heap, v.pagecache, v.large, v.output, v.threads, v.load) == (
        "1g", "1g", True, "file", 1, "pool")
    assert v.workers == DEFAULTS.workers  # both: make run's
    assert v.settings == DEFAULTS.settings == ()  # both: the settings' defaults


def test_select_puts_defaults_first_and_drops_repeats():
    assert [v.name for v in select("worker-per-cpu, wrk-pool,worker-per-cpu")] == [
        "defaults", "worker-per-cpu", "wrk-pool"]
    assert [v.name for v in select("")] == list(VARIANTS)
    assert [v.name for v in select("defaults")] == ["defaults"]


def test_select_names_an_unknown_variant():
    with pytest.raises(SystemExit, match=r"unknown variant.*two-workers"):
        select("defaults,two-workers")


def test_rounds_rotate_the_order():
    items = ["a", "b", "c"]
    assert [rotated(items, n) for n in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert rotated([], 3) == []


def test_settings_read_from_the_environment():
    cfg = Settings.from_env({"BENCH_DEFAULTS_AB_ROUNDS": "2", "BENCH_DEFAULTS_AB_DURATION": "5",
                             "BENCH_DEFAULTS_AB_VARIANTS": "defaults,worker-per-cpu",
                             "BENCH_DEFAULTS_AB_TOKENS": ""})
    assert (cfg.rounds, cfg.duration, cfg.variants) == (2, 5, "defaults,worker-per-cpu")
    assert cfg.tokens == Settings().tokens and cfg.warmup_rounds == 3


def test_workloads_default_to_create_and_get_and_an_unknown_one_is_named():
    assert Settings().workload_names() == ["create", "get"]
    cfg = Settings.from_env({"BENCH_DEFAULTS_AB_WORKLOADS": "get, list"})
    assert cfg.workload_names() == ["get", "list"]
    with pytest.raises(SystemExit, match="search"):
        Settings(workloads="get,search").workload_names()


def test_each_variant_has_its_own_neo4j_service_and_ports(tmp_path):
    cfg = dataclasses.replace(Settings(), home=str(tmp_path))
    harness = Harness(cfg, select(""))
    harness.plan()
    assert list(harness.services) == list(harness.stacks) == list(VARIANTS)
    ports = [s.port for s in harness.services.values()]
    bolts = [s.bolt_port for s in harness.stacks.values()]
    https = [s.http_port for s in harness.stacks.values()]
    n = len(VARIANTS)
    assert ports == list(range(cfg.port, cfg.port + n))
    assert bolts == list(range(cfg.bolt_port, cfg.bolt_port + n))
    assert https == list(range(cfg.http_port, cfg.http_port + n))
    assert {7687, 7688, 7689, 7474, 7475, 7476} & set(bolts + https) == set()
    assert len({s.home for s in harness.stacks.values()}) == n
    for name, service in harness.services.items():
        v = VARIANTS[name]
        assert service.stack is harness.stacks[name]
        assert (service.workers, service.output.kind) == (v.workers, v.output)
        assert (service.stack.heap, service.stack.pagecache) == (v.heap, v.pagecache)


def test_service_environment_holds_only_home_ports_and_rate_limits(tmp_path, monkeypatch):
    monkeypatch.setenv("VAULTGRAPH_NEO4J_BOLT_PORT", "7688")  # a test set-up's, say
    monkeypatch.setenv("VAULTGRAPH_WORKERS", "3")
    cfg = dataclasses.replace(Settings(), home=str(tmp_path))
    harness = Harness(cfg, select("neo4j-1g-1g,log-warning"))
    harness.plan()
    default_env, big_env, quiet_env = (s.env() for s in harness.services.values())
    ours = {k: v for k, v in default_env.items() if k.startswith("VAULTGRAPH_")}
    assert ours == {"VAULTGRAPH_HOME": str(tmp_path / "defaults"),
                    "VAULTGRAPH_PORT": str(cfg.port),
                    "VAULTGRAPH_NEO4J_BOLT_PORT": str(cfg.bolt_port),
                    "VAULTGRAPH_NEO4J_HTTP_PORT": str(cfg.http_port),
                    "VAULTGRAPH_RATE_LIMIT": "1e9", "VAULTGRAPH_RATE_BURST": "1000000000"}
    assert (big_env["VAULTGRAPH_NEO4J_HEAP"], big_env["VAULTGRAPH_NEO4J_PAGECACHE"]) == (
        "1g", "1g")
    assert "VAULTGRAPH_LOG_LEVEL" not in big_env
    assert quiet_env["VAULTGRAPH_LOG_LEVEL"] == "WARNING"
    assert "VAULTGRAPH_NEO4J_HEAP" not in quiet_env


def _sample(rps, p99, service, errors=0):
    return {"rps": rps, "p50_ms": 10.0, "p99_ms": p99, "errors": errors,
            "output_bytes_per_request": 0.0,
            "cpu_ms": {"service": service, "neo4j": 0.5, "loadgen": None}}


def test_summary_takes_medians_and_compares_with_defaults():
    summary = summarize({
        "defaults": {"create": [_sample(300, 90, 1.0), _sample(340, 80, 1.2),
                                _sample(320, 200, 1.1)]},
        "worker-per-cpu": {"create": [_sample(600, 50, 0.8, errors=2), _sample(700, 40, 0.9)]},
    })
    base, other = summary["defaults"]["create"], summary["worker-per-cpu"]["create"]
    assert (base["rps"], base["p99_ms"], base["cpu_ms"]["service"]) == (320, 90, 1.1)
    assert base["vs_defaults"] == 1.0
    assert other["rps"] == 650 and other["vs_defaults"] == round(650 / 320, 3)
    assert other["errors"] == 2
    assert other["cpu_ms"]["loadgen"] is None
    text = table(summary)
    assert "| worker-per-cpu | create | 650 | 2.031 |" in text


def test_wrk_summary_line_is_parsed_with_timeouts_as_errors():
    line = ('Running 2s test\nBENCH_JSON {"requests":1000,"duration_us":2000000,"connect":0,'
            '"read":0,"write":0,"status":3,"timeout":5,"p50":1500.0,"p99":9000.0,'
            '"p999":12000.0,"max":15000.0}\n')
    result = parse_wrk(line, 0)
    assert (result.requests, result.errors) == (1005, 8)
    assert result.rps == pytest.approx(997 / 2)
    assert (result.p50_ms, result.p99_ms) == (1.5, 9.0)


def test_wrk_without_answers_has_no_percentiles_and_a_failure_is_raised():
    line = ('BENCH_JSON {"requests":0,"duration_us":1000000,"connect":32,"read":0,"write":0,'
            '"status":0,"timeout":0,"p50":0.0,"p99":0.0,"p999":0.0,"max":0.0}')
    assert math.isnan(parse_wrk(line, 0).p50_ms)
    with pytest.raises(RuntimeError, match="wrk failed"):
        parse_wrk("unable to connect", 1)
    with pytest.raises(RuntimeError, match="wrk failed"):
        parse_wrk(line, 2)


@pytest.mark.parametrize("kind", ["terminal", "file"])
def test_output_counts_what_the_child_writes_and_keeps_its_tail(tmp_path, kind):
    output = Output(kind, tmp_path / "service.log")
    fd = output.open()
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdout.write('x' * 5000 + 'the end')"],
            stdout=fd, stderr=fd, stdin=subprocess.DEVNULL)
    finally:
        os.close(fd)
    assert child.wait(timeout=30) == 0
    deadline = time.monotonic() + 10
    while output.written() < 5007 and time.monotonic() < deadline:
        time.sleep(0.05)  # the terminal's draining thread catching up
    assert output.written() == 5007
    assert output.tail().endswith("the end") and len(output.tail()) == 4096
    output.close()


def test_a_baseline_tree_runs_the_defaults_from_its_own_code(tmp_path):
    (tmp_path / "vaultgraph").mkdir()
    (tmp_path / "vaultgraph" / "__init__.py").write_text("")
    [v] = baseline(str(tmp_path))
    assert (v.name, v.tree) == ("baseline", str(tmp_path))
    assert dataclasses.replace(v, name=DEFAULTS.name, change=DEFAULTS.change, tree="") == DEFAULTS
    stack = Neo4jStack(tmp_path / "home", 7999, 7998, v.heap, v.pagecache)
    env = ServiceProcess(stack, 8999, v.workers, Output("file", tmp_path / "out.log"),
                         v.settings, v.tree).env()
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path.resolve())
    assert env["VAULTGRAPH_CYPHER_DIR"] == str(tmp_path.resolve() / "cypher")
    assert baseline("") == []


def test_a_baseline_without_the_package_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no vaultgraph package"):
        baseline(str(tmp_path))


def test_an_interpreter_runs_the_defaults_under_its_own_python(tmp_path, monkeypatch):
    # This venv's interpreter: vaultgraph is installed beside it, as the variant requires.
    [v] = interpreters(f" {sys.executable} ,")
    version = platform.python_version()
    assert (v.name, v.python) == (f"python-{version}", str(Path(sys.executable).absolute()))
    assert dataclasses.replace(v, name=DEFAULTS.name, change=DEFAULTS.change,
                               python="") == DEFAULTS
    assert interpreters("") == []
    # The service is started as that venv's `vaultgraph`, not this process's.
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda argv, **_: started.append(argv))
    stack = Neo4jStack(tmp_path / "home", 7999, 7998, v.heap, v.pagecache)
    ServiceProcess(stack, 8999, v.workers, Output("file", tmp_path / "out.log"), v.settings,
                   v.tree, v.python).start()
    assert started[0][0] == str(Path(v.python).with_name("vaultgraph"))


def test_an_interpreter_named_twice_or_without_vaultgraph_beside_it_is_refused(tmp_path):
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.symlink_to(sys.executable)
    with pytest.raises(SystemExit, match="no vaultgraph beside"):
        interpreters(str(python))
    with pytest.raises(SystemExit, match="are both Python"):
        interpreters(f"{sys.executable},{sys.executable}")


@pytest.mark.parametrize(("name", "hook"), [("audit-off", "unaudited"),
                                            ("audit-unwaited", "audit_unwaited")])
def test_an_audit_variant_puts_its_hook_first_on_the_services_path(name, hook, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    v = VARIANTS[name]
    stack = Neo4jStack(tmp_path / "home", 7999, 7998, v.heap, v.pagecache)
    env = ServiceProcess(stack, 8999, v.workers, Output("file", tmp_path / "out.log"),
                         v.settings, v.tree).env()
    path = env["PYTHONPATH"].split(os.pathsep)
    assert path == [str(PROJECT_ROOT / "bench" / hook), "/somewhere/else"]
    assert (PROJECT_ROOT / "bench" / hook / "sitecustomize.py").is_file()
    assert not any(k.startswith("VAULTGRAPH_") and k not in (
        "VAULTGRAPH_HOME", "VAULTGRAPH_PORT", "VAULTGRAPH_NEO4J_BOLT_PORT",
        "VAULTGRAPH_NEO4J_HTTP_PORT", "VAULTGRAPH_RATE_LIMIT", "VAULTGRAPH_RATE_BURST")
        for k in env)
