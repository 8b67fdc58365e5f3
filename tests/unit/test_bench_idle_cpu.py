"""bench/idle_cpu.py's variants and its figure, without starting a worker."""

from __future__ import annotations

import sys

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench import cpu
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


def test_the_figure_is_milliseconds_a_second():
    # 30 ticks over 60 s: 30 * TICK_MS / 60 ms a second (5.0 at 100 ticks a second).
    assert ms_a_second(30, 60.0) == round(30 * cpu.TICK_MS / 60, 2)
    assert ms_a_second(0, 60.0) == 0.0
