"""bench/idle_cpu.py's variants and its figure, without starting a worker; and the helper it
starts one with (bench/hotpath_ir.py `served`), with a stand-in child."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench import cpu
from bench.hotpath_ir import served
from bench.idle_cpu import DEFAULT_VARIANTS, main, ms_a_second, variant_env


def test_defaults_set_nothing():
    assert variant_env("defaults") == {}


def test_a_variant_sets_each_pair():
    assert variant_env("VAULTGRAPH_WEBHOOK_POLL_INTERVAL=0,VAULTGRAPH_LOG_LEVEL=warning") == {
        "VAULTGRAPH_WEBHOOK_POLL_INTERVAL": "0", "VAULTGRAPH_LOG_LEVEL": "warning"}


@pytest.mark.parametrize("variant", ["VAULTGRAPH_WEBHOOK_POLL_INTERVAL", "PATH=/tmp",
                                     "VAULTGRAPH_X=1,oops"])
def test_a_malformed_variant_is_refused(variant):
    with pytest.raises(ValueError, match="expected VAULTGRAPH_"):
        variant_env(variant)


def test_main_refuses_a_malformed_variant_before_starting_anything(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a worker was started")

    monkeypatch.setattr("bench.idle_cpu.measure", never)
    with pytest.raises(ValueError):
        main(["defaults", "NOT_OURS=1"])


def test_the_default_variants_are_well_formed():
    assert [variant_env(v) for v in DEFAULT_VARIANTS] == [
        {}, {"VAULTGRAPH_WEBHOOK_POLL_INTERVAL": "0"}]


def test_the_figure_is_milliseconds_a_second(monkeypatch):
    monkeypatch.setattr(cpu, "TICK_MS", 10.0)  # 100 ticks a second
    assert ms_a_second(30, 60.0) == 5.0
    assert ms_a_second(0, 60.0) == 0.0
    assert ms_a_second(1, 3.0) == 3.33


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A child that answers 200 on /ready until interrupted (SIGINT ends it, as it ends a worker).
READY = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/ready" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_served_names_the_log_of_a_process_that_ended_before_it_was_ready(tmp_path):
    log = tmp_path / "child.log"
    with pytest.raises(RuntimeError, match=f"the child did not start; see {log}"):
        with served([sys.executable, "-c", "print('no'); raise SystemExit(3)"],
                    dict(os.environ), log, _free_port(), "the child"):
            raise AssertionError("entered although the child never answered /ready")
    assert log.read_text().strip() == "no"


def test_served_stops_the_process_when_the_block_raises(tmp_path):
    port = _free_port()
    with pytest.raises(ValueError, match="inside"):
        with served([sys.executable, "-c", READY, str(port)], dict(os.environ),
                    tmp_path / "ready.log", port, "the child") as proc:
            assert proc.poll() is None
            raise ValueError("inside")
    assert proc.poll() is not None
