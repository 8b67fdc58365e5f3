"""bench/hotpath_ir.py's load without valgrind: how it deals a pool of requests out over its
connections."""

from __future__ import annotations

import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.hotpath_ir import _drive, run_ops
from bench.workloads import Request


@pytest.fixture
def recorder():
    """A local HTTP/1.1 server answering 200, or 404 for paths under /missing, that records
    each request's path, API key and connection (its client port)."""
    seen: list[tuple[str, str, int]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the service answers

        def do_GET(self):
            with lock:
                seen.append((self.path, self.headers["SVC-API-KEY"], self.client_address[1]))
            status = 404 if self.path.startswith("/missing") else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def test_requests_are_dealt_over_the_connections_each_sent_once(recorder):
    port, seen = recorder
    pool = [Request("GET", f"/tokens/{i}") for i in range(8)] + [Request("GET", "/missing/x")]
    assert _drive(port, "key-1", pool, 9, connections=3) == 1  # the one 404
    assert sorted(path for path, _, _ in seen) == sorted(r.path for r in pool)
    assert {key for _, key, _ in seen} == {"key-1"}
    by_connection: dict[int, list[str]] = {}
    for path, _, client_port in seen:
        by_connection.setdefault(client_port, []).append(path)
    assert sorted(len(paths) for paths in by_connection.values()) == [3, 3, 3]  # kept alive


def test_one_connection_sends_the_pool_in_order_and_wraps_around(recorder):
    port, seen = recorder
    pool = [Request("GET", f"/tokens/{i}") for i in range(3)]
    assert _drive(port, "key-2", pool, 5, connections=0) == 0  # 0 is taken as 1
    assert [path for path, _, _ in seen] == [
        "/tokens/0", "/tokens/1", "/tokens/2", "/tokens/0", "/tokens/1"]
    assert len({client_port for _, _, client_port in seen}) == 1


class _Settles:
    """Stands in for the audit writer's `settle`, noting how many operations were done at each
    call."""

    def __init__(self, done: list[str]):
        self.done = done
        self.at: list[int] = []

    async def settle(self):
        self.at.append(len(self.done))


@pytest.mark.parametrize("concurrency", [0, 1, 3])
async def test_the_bare_client_runs_each_operation_once_and_counts_its_errors(concurrency):
    done: list[str] = []

    async def op(item: str) -> bool:
        done.append(item)
        if item == "bad":
            raise LookupError(item)
        return item == "c"  # its event linked with no one waiting, as an association's

    items = ["a", "b", "bad", "c", "d"]
    audit = _Settles(done)
    errors = await run_ops(op, items, 1, 7, concurrency, audit)  # from "b", wrapping around
    assert errors == 2  # "bad" came round twice
    assert sorted(done) == sorted(["b", "bad", "c", "d", "a", "b", "bad"])
    if concurrency <= 1:  # 0 is taken as 1
        assert done == ["b", "bad", "c", "d", "a", "b", "bad"]
        # One at a time, an event linked with no one waiting is written before the next
        # operation ("c", the third), as the service's is before its client's next request;
        # a settled write event waits for the settle wait, and everything is settled at the
        # end.
        assert audit.at == [3, 7]
    else:
        # Several in flight: once, at the end, the writer batching what was in flight.
        assert audit.at == [7]


def test_the_tools_take_workloads_in_the_benchmarks_order_and_refuse_what_they_cannot_run():
    from bench.hotpath_ir import selected
    from bench.workloads import WORKLOADS

    order = [w.name for w in WORKLOADS]
    assert [w.name for w in selected(["proxy", "get"])] == sorted(
        ["proxy", "get"], key=order.index)
    with pytest.raises(SystemExit, match="no such workload: gte"):
        selected(["get", "gte"])
    # Its deliveries need a receiver and the outbox's sender, which these tools do not start:
    # run, it would measure a create with no webhook under the workload's name.
    with pytest.raises(SystemExit, match="webhook_create: measured with a webhook receiver"):
        selected(["create", "webhook_create"])


def test_a_run_with_failed_requests_is_refused():
    from bench.hotpath_ir import refuse_failures

    refuse_failures("get", "requests to this tree", 0, 450)  # none failed: nothing to say
    with pytest.raises(SystemExit, match="proxy: 3 of 450 bare client operations failed"):
        refuse_failures("proxy", "bare client operations", 3, 450)


def test_the_bare_child_takes_its_parents_proxy_and_destination(monkeypatch):
    from bench.hotpath_ir import PROXY_ENV, ProxyTarget

    monkeypatch.setenv(PROXY_ENV, "p-1 http://127.0.0.1:4321/v1")
    inherited = ProxyTarget.inherited()
    assert (inherited.proxy_id, inherited.url, inherited.destination) == (
        "p-1", "http://127.0.0.1:4321/v1", None)
    monkeypatch.delenv(PROXY_ENV)
    assert ProxyTarget.inherited().proxy_id == ""


def test_another_trees_service_runs_its_own_code_and_statements(tmp_path, monkeypatch):
    from bench.hotpath_ir import Worker
    from vaultgraph.settings import PROJECT_ROOT

    monkeypatch.delenv("VAULTGRAPH_CYPHER_DIR", raising=False)
    other = Worker(tmp_path / "base", 8391, "k", tmp_path / "out" / "get.callgrind")
    # The packaged catalog is found through this checkout's install, whatever PYTHONPATH
    # says: without its own cypher/ the other tree would run this tree's statements.
    assert other.env["PYTHONPATH"] == str(tmp_path / "base")
    assert other.env["VAULTGRAPH_CYPHER_DIR"] == str(tmp_path / "base" / "cypher")
    # This tree's too: it need not be the installed one (a worktree run with PYTHONPATH), and
    # its code with the installed tree's statements would be measured otherwise.
    this = Worker(PROJECT_ROOT, 8391, "k", tmp_path / "out" / "get.callgrind")
    assert this.env["VAULTGRAPH_CYPHER_DIR"] == str(PROJECT_ROOT / "cypher")
    assert this.env.get("PYTHONPATH") == os.environ.get("PYTHONPATH")


def test_every_counted_process_hashes_strings_with_one_seed(tmp_path, monkeypatch):
    import bench.hotpath_ir as hotpath_ir
    from bench.hotpath_ir import Worker

    monkeypatch.delenv("HOTPATH_IR_HASH_SEED", raising=False)
    monkeypatch.setenv("PYTHONHASHSEED", "random")  # the caller's own is not the count's
    worker = Worker(tmp_path / "base", 8391, "k", tmp_path / "out" / "get.callgrind")
    assert worker.env["PYTHONHASHSEED"] == "0"
    monkeypatch.setenv("HOTPATH_IR_HASH_SEED", "random")  # Python's default, asked for
    assert Worker(tmp_path / "base", 8391, "k",
                  tmp_path / "out" / "get.callgrind").env["PYTHONHASHSEED"] == "random"
    # What the bare client's process is given too (it starts under valgrind, not here), and
    # what the record says.
    monkeypatch.setenv("HOTPATH_IR_HASH_SEED", "7")
    assert hotpath_ir.hash_seed() == {"PYTHONHASHSEED": "7"}
    assert hotpath_ir.record({}, 1, 1, {})["settings"]["hash_seed"] == "7"
