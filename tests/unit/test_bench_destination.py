"""The proxy workload's destination (bench/destination.py): a process of its own, whose CPU the
benchmark reads apart from its own process's (the bare client's, the load generator's)."""

from __future__ import annotations

import os
import sys
import time
import urllib.request

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench import cpu
from bench.destination import ANSWER, Destination


def test_the_destination_answers_from_a_process_whose_cpu_is_not_the_benchmarks():
    destination = Destination().start()
    try:
        assert destination.running and destination.pid != os.getpid()
        assert destination.url.startswith("http://127.0.0.1:") and destination.url.endswith(
            "/v1")
        groups = {"client": os.getpid(), "destination": destination.pid}
        before = cpu.snapshot(groups)
        started = time.monotonic()
        answered = 0
        while time.monotonic() - started < 1.0 or answered < 50:
            request = urllib.request.Request(destination.url + "/charges", data=b'{"a": 1}',
                                             method="POST")
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert answer.status == 200 and answer.read() == ANSWER
            answered += 1
        after = cpu.snapshot(groups)
        # The destination's serving is its own group's: with it named, the benchmark's
        # process (its child's parent) does not count it.
        assert after["destination"] > before["destination"]
        alone = cpu.snapshot({"client": os.getpid()})
        assert alone["client"] >= after["client"] + (after["destination"]
                                                     - before["destination"])
    finally:
        destination.stop()
    assert not destination.running
