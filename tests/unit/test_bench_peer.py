"""bench/peer.py's own logic, without either service: its settings, what it reads from the
peer's CLI, the card numbers it loads, the ratios and the table it reports."""

from __future__ import annotations

import asyncio
import sys

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench import cpu
from bench.defaults_ab import measure_window, summarize
from bench.peer import (
    Settings,
    json_object_with,
    luhn,
    parse_env_lines,
    pg_settings,
    ratios,
    secrets_settings,
    single_user_counts,
    table,
)
from bench.stats import Result
from vaultgraph.expressions.filters import luhn_valid


def test_settings_read_from_the_environment():
    cfg = Settings.from_env({"BENCH_PEER_ROUNDS": "2", "BENCH_PEER_DURATION": "5",
                             "BENCH_PEER_SOURCE": "/src/secrets", "BENCH_PEER_TOKENS": ""})
    assert (cfg.rounds, cfg.duration, cfg.source) == (2, 5, "/src/secrets")
    assert (cfg.tokens, cfg.warmup_rounds, cfg.connections, cfg.threads) == (1000, 3, 32, 2)


def test_the_bare_client_is_a_side_unless_turned_off():
    assert Settings.from_env({}).sides == ("vaultgraph", "secrets", "bare")
    assert Settings.from_env({"BENCH_PEER_BARE": "0"}).sides == ("vaultgraph", "secrets")


def test_ports_are_apart_from_the_other_set_ups():
    cfg = Settings()
    ours = {cfg.port, cfg.secrets_port, cfg.secrets_port + 1, cfg.bolt_port, cfg.http_port,
            cfg.pg_port}
    assert len(ours) == 6
    # make run / the tests / make bench, and defaults_ab's first ones.
    assert ours & {7687, 7688, 7689, 7474, 7475, 7476, 8080, 8081, 8190, 7871, 7571} == set()


def test_postgres_commits_durably_and_listens_on_loopback_only():
    s = pg_settings(Settings())
    assert (s["fsync"], s["synchronous_commit"]) == ("on", "on")
    assert s["listen_addresses"] == "127.0.0.1" and s["unix_socket_directories"] == ""
    assert s["port"] == "55432"


def test_secrets_runs_without_rate_limits_on_the_private_cluster():
    env = secrets_settings(Settings())
    assert env["RATE_LIMIT_ENABLED"] == env["RATE_LIMIT_TOKEN_ENABLED"] == "false"
    assert env["DB_DRIVER"] == "postgres" and ":55432/" in env["DB_CONNECTION_STRING"]
    assert env["DB_MAX_IDLE_CONNECTIONS"] == env["DB_MAX_OPEN_CONNECTIONS"]
    default_pool = secrets_settings(Settings.from_env({"BENCH_PEER_SECRETS_IDLE_CONNECTIONS": "5"}))
    assert default_pool["DB_MAX_IDLE_CONNECTIONS"] == "5"
    assert env["METRICS_PORT"] == str(int(env["SERVER_PORT"]) + 1)


@pytest.mark.parametrize("body", ["4" + "0" * 14, "453201511283036", "5" * 15, "49927398716"])
def test_loaded_card_numbers_pass_the_luhn_check(body):
    number = luhn(body)
    assert number.startswith(body) and len(number) == len(body) + 1
    assert luhn_valid(number)
    assert not luhn_valid(number[:-1] + str((int(number[-1]) + 1) % 10))


def test_master_key_lines_are_read_and_other_lines_ignored():
    printed = ('time=... level=INFO msg="master key created"\n'
               '# add these to your environment\n'
               'MASTER_KEYS="default:QUJD=="\n'
               'export ACTIVE_MASTER_KEY_ID=default\n')
    assert parse_env_lines(printed) == {"MASTER_KEYS": "default:QUJD==",
                                        "ACTIVE_MASTER_KEY_ID": "default"}


def test_the_cli_answer_is_found_among_its_log_lines():
    text = ('{"time":"t","level":"INFO","msg":"creating client"}\nnot json {\n'
            '{\n  "client_id": "c1",\n  "secret": "s"\n}\n'
            '{"time":"t","level":"INFO","msg":"client created","client_id":"c1"}\n')
    assert json_object_with(text, "secret") == {"client_id": "c1", "secret": "s"}
    with pytest.raises(ValueError, match="no JSON object with 'secret'"):
        json_object_with('plain text\n[1]\n{"client_id": "c1"}', "secret")


def test_row_counts_are_read_from_a_single_user_backends_answers():
    text = ('\nPostgreSQL stand-alone backend 15.18\nbackend> \t 1: audit_logs\t(typeid = 20, '
            'len = 8, typmod = -1, byval = t)\n\t----\n\t 1: audit_logs = "17709"\t(typeid = 20, '
            'len = 8, typmod = -1, byval = t)\n\t----\nbackend> \t 1: tokenization_tokens = "12"'
            '\t(typeid = 20)\n')
    assert single_user_counts(text, ("audit_logs", "tokenization_tokens", "clients")) == {
        "audit_logs": 17709, "tokenization_tokens": 12, "clients": None}


def _sample(rps, service, database):
    return {"rps": rps, "p50_ms": 50.0, "p99_ms": 200.0, "errors": 0,
            "output_bytes_per_request": 300.0,
            "cpu_ms": {"service": service, "database": database, "loadgen": 0.1}}


def test_ratios_divide_vaultgraph_by_secrets():
    summary = summarize({
        "vaultgraph": {"create": [_sample(300, 3.0, 1.0), _sample(340, 3.2, 1.2)],
                       "get": [_sample(500, 2.0, 0.8)]},
        "secrets": {"create": [_sample(600, 1.0, 1.5), _sample(600, 1.0, 1.7)],
                    "get": [_sample(400, 0.5, 1.5)]},
    })
    q = ratios(summary)
    assert q["create"]["rps"] == round(320 / 600, 3)
    assert q["get"]["rps"] == 1.25
    assert q["create"]["service_cpu_ms"] == 3.1
    assert q["create"]["database_cpu_ms"] == round(1.1 / 1.6, 3)
    assert q["get"]["service_and_database_cpu_ms"] == round(2.8 / 2.0, 3)
    text = table(summary, q)
    assert "| vaultgraph | create | 320 |" in text
    assert "| secrets | get | 400 |" in text
    assert "| vaultgraph ÷ secrets | get | 1.250 |" in text


def test_the_bare_client_is_divided_by_secrets_and_shown_beside_vaultgraph():
    summary = summarize({
        "vaultgraph": {"create": [_sample(300, 3.0, 1.0)]},
        "secrets": {"create": [_sample(600, 1.0, 1.5)]},
        "bare": {"create": [{**_sample(450, 2.0, 1.2), "output_bytes_per_request": None}]},
    })
    q, bare = ratios(summary), ratios(summary, "bare")
    assert (q["create"]["rps"], bare["create"]["rps"]) == (0.5, 0.75)
    assert bare["create"]["service_and_database_cpu_ms"] == round(3.2 / 2.5, 3)
    text = table(summary, q, bare)
    assert "| bare | create | 450 |" in text
    assert "| bare ÷ secrets | create | 0.750 |" in text
    assert text.index("| vaultgraph ÷ secrets |") < text.index("| bare ÷ secrets |")


def test_a_workload_missing_on_one_side_has_no_ratio():
    summary = summarize({"vaultgraph": {"create": [_sample(300, 3.0, 1.0)]},
                         "secrets": {"get": [_sample(400, 0.5, 1.5)]}})
    assert ratios(summary) == {}


def test_a_connection_reaped_while_the_process_table_is_read_is_counted_once(monkeypatch):
    # The database's tree: its root (5 ticks) and a backend (100 ticks) that ends and is
    # reaped after the reaped ticks were first read and before the table is: in neither, the
    # backend's 100 ticks would land in the window (110 ticks, not 10). The window adds 10.
    state = {"alive": True, "reaped": 0, "root": 5, "scans": 0}

    def snapshot(groups):
        state["scans"] += 1
        if state["scans"] == 1:  # the backend ends as the first scan starts
            state["alive"], state["reaped"] = False, 100
        return {"database": state["root"] + (100 if state["alive"] else 0)}

    monkeypatch.setattr(cpu, "snapshot", snapshot)
    monkeypatch.setattr(cpu, "reaped_ticks", lambda pid: state["reaped"])

    async def run():
        state["root"] += 10
        return Result(requests=10, errors=0, seconds=1.0, p50_ms=1.0, p99_ms=2.0,
                      p999_ms=3.0)

    out = asyncio.run(measure_window({"database": 1}, run, reaping=("database",)))
    assert out["cpu_ms"]["database"] == round(10 * cpu.TICK_MS / 10, 3)
    assert state["scans"] == 3  # the first read again, once
