"""bench/layers.py: the chain it times is the one aiohttp builds, and suspends as often as asked."""

from __future__ import annotations

import sys

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.layers import chain, drive


@pytest.mark.parametrize(("layers", "suspensions"), [(0, 0), (1, 4), (6, 4), (3, 7)])
def test_a_chain_passes_the_request_through_and_suspends_as_often_as_asked(layers, suspensions):
    handler = chain(layers, suspensions)
    assert drive(handler, "request") == "request"
    coro = handler("request")
    sends = 0
    with pytest.raises(StopIteration):
        while True:
            coro.send(None)
            sends += 1
    assert sends == suspensions
    depth, inner = 0, handler
    while "handler" in getattr(inner, "keywords", {}):  # one partial a middleware, as aiohttp
        depth, inner = depth + 1, inner.keywords["handler"]
    assert depth == layers
