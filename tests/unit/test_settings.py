"""Settings: read from VAULTGRAPH_* variables (each one documented in docs/configuration.md:
tests/docs/test_configuration.py)."""

from __future__ import annotations

import pytest

from vaultgraph.settings import Settings


def test_values_are_read_and_typed_from_the_environment():
    s = Settings.from_env({"VAULTGRAPH_PORT": "9000", "VAULTGRAPH_AUTH_CACHE_TTL": "0.5",
                           "VAULTGRAPH_HOST": "0.0.0.0"})
    assert (s.port, s.auth_cache_ttl, s.host) == (9000, 0.5, "0.0.0.0")


def test_empty_values_keep_the_default():
    assert Settings.from_env({"VAULTGRAPH_PORT": ""}).port == Settings().port


def test_a_malformed_number_names_the_variable():
    with pytest.raises(ValueError, match="VAULTGRAPH_PORT"):
        Settings.from_env({"VAULTGRAPH_PORT": "eighty"})


@pytest.mark.parametrize(("name", "what"), [("VAULTGRAPH_PORT", "a whole number"),
                                            ("VAULTGRAPH_AUTH_CACHE_TTL", "a number")])
def test_a_value_of_the_wrong_type_is_named_in_words(name, what):
    from vaultgraph.settings import ConfigError

    with pytest.raises(ConfigError) as caught:
        Settings.from_env({name: "many"})
    assert (caught.value.cause, caught.value.fix) == (
        f"{name} is not {what}", f"set {name} to {what} or unset it")


def test_workers_zero_means_one_per_cpu_this_process_may_use():
    import os

    from vaultgraph.settings import available_cpus

    assert Settings().workers == 1 and Settings().worker_count == 1
    assert Settings(workers=0).worker_count == available_cpus()
    assert 1 <= available_cpus() <= len(os.sched_getaffinity(0))
    assert Settings(workers=3).worker_count == 3


@pytest.mark.parametrize(("cpus", "expected"), [(1, 1), (2, 1), (3, 1), (4, 2), (16, 8)])
def test_beside_the_local_neo4j_workers_zero_is_half_the_cpus(cpus, expected, monkeypatch):
    from vaultgraph.cli.serve import with_workers
    from vaultgraph.settings import workers_beside_neo4j

    assert workers_beside_neo4j(cpus) == expected
    monkeypatch.setattr("vaultgraph.settings.available_cpus", lambda: cpus)
    local = with_workers(Settings(workers=0), local=True, workers=None)
    assert local.workers == local.worker_count == expected
    # Without the local Neo4j, 0 stays one per CPU; a number given is kept either way.
    assert with_workers(Settings(), local=False, workers=0).worker_count == cpus
    assert with_workers(Settings(workers=0), local=True, workers=3).worker_count == 3
    assert with_workers(Settings(workers=5), local=True, workers=None).worker_count == 5


@pytest.mark.parametrize(("cpu_max", "cap"), [("150000 100000\n", 2), ("50000 100000\n", 1),
                                              ("100000 100000\n", 1), ("max 100000\n", None),
                                              ("100000 0\n", None), ("garbage\n", None)])
def test_a_cgroup_v2_cpu_quota_caps_the_cpus(tmp_path, cpu_max, cap):
    import os

    from vaultgraph.settings import available_cpus

    path = tmp_path / "cpu.max"
    path.write_text(cpu_max)
    affinity = len(os.sched_getaffinity(0))
    assert available_cpus(path, tmp_path / "no-v1") == (
        affinity if cap is None else min(affinity, cap))


@pytest.mark.parametrize(("quota", "cap"), [("150000", 2), ("-1", None), ("x", None)])
def test_a_cgroup_v1_cpu_quota_caps_the_cpus(tmp_path, quota, cap):
    import os

    from vaultgraph.settings import available_cpus

    (tmp_path / "cpu.cfs_quota_us").write_text(quota + "\n")
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    affinity = len(os.sched_getaffinity(0))
    assert available_cpus(tmp_path / "no-v2", tmp_path) == (
        affinity if cap is None else min(affinity, cap))


def test_no_cgroup_file_leaves_the_affinity_mask(tmp_path):
    import os

    from vaultgraph.settings import available_cpus

    assert available_cpus(tmp_path / "absent", tmp_path / "absent") == len(
        os.sched_getaffinity(0))


@pytest.mark.parametrize(("workers", "lanes", "expected"), [
    (1, 0, 2),   # one process: one lane's batch gathers while the other's commits
    (2, 0, 1),   # several workers overlap each other's commits: one lane each
    (2, 3, 3),   # an explicit count wins
    (1, 1, 1),
])
def test_audit_lanes_follow_the_worker_count_unless_set(workers, lanes, expected):
    assert Settings(workers=workers, audit_lanes=lanes).audit_lane_count == expected


def test_the_default_audit_lanes_with_workers_per_cpu_follow_the_cpus(monkeypatch):
    import vaultgraph.settings as module

    monkeypatch.setattr(module, "available_cpus", lambda: 4)
    assert Settings(workers=0).audit_lane_count == 1
    monkeypatch.setattr(module, "available_cpus", lambda: 1)
    assert Settings(workers=0).audit_lane_count == 2


def test_each_worker_is_told_it_is_one_process_with_the_supervisors_lane_count():
    from vaultgraph.server import worker_env

    env = worker_env(Settings(workers=3, metrics_dir="/run/m"), {"PATH": "/bin"})
    assert (env["VAULTGRAPH_WORKERS"], env["VAULTGRAPH_AUDIT_LANES"]) == ("1", "1")
    assert (env["PATH"], env["PROMETHEUS_MULTIPROC_DIR"]) == ("/bin", "/run/m")
    # What the worker reads back is what the supervisor chose, not a single process's two.
    worker = Settings.from_env(env)
    assert (worker.worker_count, worker.audit_lane_count) == (1, 1)
    explicit = worker_env(Settings(workers=3, audit_lanes=2), {})
    assert Settings.from_env(explicit).audit_lane_count == 2


def test_secrets_stay_out_of_reprs():
    # A repr lands in logs and test reports (pytest's assertion explanations, --showlocals).
    from vaultgraph.testing.service import ServiceProcess, Tenant
    from vaultgraph.testing.vault import Neo4jTarget

    settings = Settings(kek="v1:" + "k" * 43, neo4j_password="hunter2-secret")
    shown = " ".join((repr(settings), repr(Neo4jTarget("bolt://x", "hunter2-secret")),
                      repr(Tenant("t", "a", "vg_secretkey")),
                      repr(ServiceProcess({"VAULTGRAPH_KEK": "v1:" + "k" * 43}))))
    assert "kkkk" not in shown and "hunter2" not in shown and "vg_secretkey" not in shown


URI_FIX = ("set VAULTGRAPH_NEO4J_URI to bolt://HOST:PORT (one server) or neo4j://HOST:PORT (a "
           "cluster; +s for TLS, as in neo4j+s://), or unset it for the local server")


@pytest.mark.parametrize(("env", "cause", "fix"), [
    ({"VAULTGRAPH_LOG_LEVEL": "verbose"}, "VAULTGRAPH_LOG_LEVEL is 'verbose'",
     "set VAULTGRAPH_LOG_LEVEL to DEBUG, INFO, WARNING, ERROR or CRITICAL"),
    ({"VAULTGRAPH_LOG_FORMAT": "xml"}, "VAULTGRAPH_LOG_FORMAT is 'xml'",
     "set VAULTGRAPH_LOG_FORMAT to json or text"),
    ({"VAULTGRAPH_PORT": "70000"}, "VAULTGRAPH_PORT is 70000, not a port",
     "set VAULTGRAPH_PORT to a port from 0 to 65535"),
    ({"VAULTGRAPH_METRICS_PORT": "-1"}, "VAULTGRAPH_METRICS_PORT is -1, not a port",
     "set VAULTGRAPH_METRICS_PORT to a port from 0 to 65535"),
    ({"VAULTGRAPH_NEO4J_BOLT_PORT": "0"}, "VAULTGRAPH_NEO4J_BOLT_PORT is 0, not a port",
     "set VAULTGRAPH_NEO4J_BOLT_PORT to a port from 1 to 65535"),
    ({"VAULTGRAPH_REQUEST_TIMEOUT": "nan"}, "VAULTGRAPH_REQUEST_TIMEOUT is nan",
     "set VAULTGRAPH_REQUEST_TIMEOUT to a number above 0"),
    ({"VAULTGRAPH_SHUTDOWN_GRACE": "-5"}, "VAULTGRAPH_SHUTDOWN_GRACE is -5.0",
     "set VAULTGRAPH_SHUTDOWN_GRACE to a number of 0 or more"),
    ({"VAULTGRAPH_HEADER_READ_TIMEOUT": "inf"}, "VAULTGRAPH_HEADER_READ_TIMEOUT is inf",
     "set VAULTGRAPH_HEADER_READ_TIMEOUT to a number of 0 or more"),
    ({"VAULTGRAPH_MAX_BODY_BYTES": "-1"}, "VAULTGRAPH_MAX_BODY_BYTES is -1",
     "set VAULTGRAPH_MAX_BODY_BYTES to a number above 0"),
    ({"VAULTGRAPH_PAGE_SIZE_MAX": "0"}, "VAULTGRAPH_PAGE_SIZE_MAX is 0",
     "set VAULTGRAPH_PAGE_SIZE_MAX to a number above 0"),
    # 0 days would have deleted the whole audit trail at the first prune.
    ({"VAULTGRAPH_AUDIT_RETENTION_DAYS": "0"}, "VAULTGRAPH_AUDIT_RETENTION_DAYS is 0.0",
     "set VAULTGRAPH_AUDIT_RETENTION_DAYS to a number above 0"),
    ({"VAULTGRAPH_AUTH_FAILURE_WINDOW": "0"}, "VAULTGRAPH_AUTH_FAILURE_WINDOW is 0.0",
     "set VAULTGRAPH_AUTH_FAILURE_WINDOW to a number above 0"),
    ({"VAULTGRAPH_IDEMPOTENCY_LEASE": "5"},
     "VAULTGRAPH_IDEMPOTENCY_LEASE (5) is shorter than VAULTGRAPH_REQUEST_TIMEOUT (10)",
     "set VAULTGRAPH_IDEMPOTENCY_LEASE to at least VAULTGRAPH_REQUEST_TIMEOUT (best: above "
     "Neo4j's transaction timeout, 60 s by default)"),
    ({"VAULTGRAPH_IDEMPOTENCY_TTL": "30"},
     "VAULTGRAPH_IDEMPOTENCY_TTL (30) is shorter than VAULTGRAPH_IDEMPOTENCY_LEASE (60)",
     "set VAULTGRAPH_IDEMPOTENCY_TTL to at least VAULTGRAPH_IDEMPOTENCY_LEASE"),
    # Settings bounded by another: start-up waited forever for 500 connections of a pool of
    # 100, and a page without ?size= was longer than the largest ?size= allowed.
    ({"VAULTGRAPH_NEO4J_POOL_WARM": "500"},
     "VAULTGRAPH_NEO4J_POOL_WARM (500) is above VAULTGRAPH_NEO4J_POOL_SIZE (100)",
     "set VAULTGRAPH_NEO4J_POOL_WARM to at most VAULTGRAPH_NEO4J_POOL_SIZE (start-up opens that "
     "many connections in the pool before it is ready)"),
    ({"VAULTGRAPH_NEO4J_POOL_SIZE": "8"},
     "VAULTGRAPH_NEO4J_POOL_WARM (16) is above VAULTGRAPH_NEO4J_POOL_SIZE (8)",
     "set VAULTGRAPH_NEO4J_POOL_WARM to at most VAULTGRAPH_NEO4J_POOL_SIZE (start-up opens that "
     "many connections in the pool before it is ready)"),
    ({"VAULTGRAPH_PAGE_SIZE_DEFAULT": "500"},
     "VAULTGRAPH_PAGE_SIZE_DEFAULT (500) is above VAULTGRAPH_PAGE_SIZE_MAX (100)",
     "set VAULTGRAPH_PAGE_SIZE_DEFAULT to at most VAULTGRAPH_PAGE_SIZE_MAX (a page without "
     "?size= is no longer than one with the largest)"),
    # A URI or a memory size the driver or the JVM cannot use: named at load (they were
    # "unexpected ConfigurationError", "unexpected ModuleNotFoundError", or Neo4j's exit 1).
    ({"VAULTGRAPH_NEO4J_URI": "garbage"}, "VAULTGRAPH_NEO4J_URI has no scheme, not a Bolt one",
     URI_FIX),
    ({"VAULTGRAPH_NEO4J_URI": "http://127.0.0.1:7702"},
     "VAULTGRAPH_NEO4J_URI has the scheme 'http', not a Bolt one", URI_FIX),
    ({"VAULTGRAPH_NEO4J_URI": "bolt://127.0.0.1:99999"},
     "VAULTGRAPH_NEO4J_URI is not a URI the driver can read", URI_FIX),
    ({"VAULTGRAPH_NEO4J_URI": "neo4j+s://:7687"}, "VAULTGRAPH_NEO4J_URI names no host",
     URI_FIX),
    ({"VAULTGRAPH_NEO4J_HEAP": "abc"}, "VAULTGRAPH_NEO4J_HEAP is 'abc', not a memory size",
     "set VAULTGRAPH_NEO4J_HEAP to a number with k, m or g after it, such as 512m or 2g"),
    ({"VAULTGRAPH_NEO4J_PAGECACHE": "1.5g"},
     "VAULTGRAPH_NEO4J_PAGECACHE is '1.5g', not a memory size",
     "set VAULTGRAPH_NEO4J_PAGECACHE to a number with k, m or g after it, such as 512m or 2g"),
    ({"VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "7200"}, "VAULTGRAPH_EXPIRY_SWEEP_INTERVAL is 7200.0",
     "set VAULTGRAPH_EXPIRY_SWEEP_INTERVAL to 3600 or less (expired tokens must be deleted "
     "within an hour), or 0 where another replica sweeps"),
])
def test_a_value_out_of_its_range_is_named(env, cause, fix):
    from vaultgraph.settings import ConfigError

    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    assert (caught.value.cause, caught.value.fix) == (cause, fix)


def test_values_in_range_are_kept():
    s = Settings.from_env({"VAULTGRAPH_LOG_LEVEL": "debug", "VAULTGRAPH_LOG_FORMAT": "text",
                           "VAULTGRAPH_PORT": "0", "VAULTGRAPH_METRICS_PORT": "65535",
                           "VAULTGRAPH_RATE_LIMIT": "0", "VAULTGRAPH_SHUTDOWN_GRACE": "0",
                           "VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "3600"})
    assert (s.log_level, s.log_format, s.port, s.metrics_port, s.rate_limit,
            s.shutdown_grace, s.expiry_sweep_interval) == ("debug", "text", 0, 65535, 0.0, 0.0,
                                                           3600.0)


def test_a_cypher_dir_that_is_not_a_directory_is_named(tmp_path):
    from vaultgraph.settings import ConfigError

    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"VAULTGRAPH_CYPHER_DIR": str(missing)})
    assert caught.value.cause == f"VAULTGRAPH_CYPHER_DIR is {str(missing)!r}, not a directory"
    # A directory with no catalog in it (/tmp): named at load, not "unexpected KeyError".
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"VAULTGRAPH_CYPHER_DIR": str(tmp_path)})
    assert caught.value.cause == (f"VAULTGRAPH_CYPHER_DIR is {str(tmp_path)!r}, which holds no "
                                  "catalog (no schema/*.cypher)")
    (tmp_path / "schema").mkdir()
    (tmp_path / "schema" / "001.cypher").write_text("RETURN 1")
    assert Settings.from_env({"VAULTGRAPH_CYPHER_DIR": str(tmp_path)}).cypher_dir == str(tmp_path)


@pytest.mark.parametrize(("env", "value"), [
    ({"VAULTGRAPH_NEO4J_URI": "neo4j+s://abc.databases.neo4j.io"},
     "neo4j+s://abc.databases.neo4j.io"),
    ({"VAULTGRAPH_NEO4J_URI": "bolt://[::1]:7687"}, "bolt://[::1]:7687"),
    ({"VAULTGRAPH_NEO4J_HEAP": "2G"}, "2G"),
    ({"VAULTGRAPH_NEO4J_PAGECACHE": "1048576"}, "1048576")])
def test_neo4j_uris_and_memory_sizes_the_driver_and_jvm_read_are_kept(env, value):
    settings = Settings.from_env(env)
    assert value in (settings.neo4j_uri, settings.neo4j_heap, settings.neo4j_pagecache)
