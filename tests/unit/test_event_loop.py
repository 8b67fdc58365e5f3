"""VAULTGRAPH_EVENT_LOOP: the server's coroutine runs on the loop asked for."""

from __future__ import annotations

import asyncio

import pytest

from vaultgraph.server import run, run_loop
from vaultgraph.settings import ConfigError, Settings


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.parametrize(("choice", "module"), [("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_the_server_runs_on_the_loop_asked_for(choice, module):
    ran = run_loop(Settings(event_loop=choice), loop_module())
    assert ran.split(".")[0] == module


def test_an_unknown_loop_stops_start_up_with_the_fix():
    with pytest.raises(ConfigError) as caught:
        run(Settings.from_env({"VAULTGRAPH_EVENT_LOOP": "trio"}))
    assert caught.value.cause == "VAULTGRAPH_EVENT_LOOP is 'trio'"
    assert caught.value.fix == "set VAULTGRAPH_EVENT_LOOP to uvloop or asyncio"


@pytest.mark.parametrize(("setting", "young"), [("20000", 20_000), ("0", None)])
def test_a_serving_process_collects_its_young_garbage_as_configured(setting, young):
    import gc

    from vaultgraph.server import tune_gc

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, *before[1:])
        tune_gc(Settings.from_env({"VAULTGRAPH_GC_YOUNG_THRESHOLD": setting}))
        # 0 leaves Python's own threshold; the older generations' are never changed.
        assert gc.get_threshold() == (young or 700, *before[1:])
    finally:
        gc.set_threshold(*before)
