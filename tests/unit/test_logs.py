"""Logs carry ids, counts, timings and stacks: never an exception's message, which may quote
a request (aiohttp's parser errors quote the raw header or body bytes) or driver text."""

from __future__ import annotations

import logging
import sys

import orjson
import pytest

from vaultgraph.logs import JsonFormatter, TextFormatter, configure

SECRET = "vg_SECRETSECRET"
CARD = "4242424242424242"


def _raise_chained() -> None:
    try:
        raise KeyError(CARD)
    except KeyError as exc:
        raise ValueError(f"bad header {SECRET!r}") from exc


def _record() -> logging.LogRecord:
    logger = logging.getLogger("vaultgraph.test")
    try:
        _raise_chained()
    except ValueError:
        return logger.makeRecord(logger.name, logging.ERROR, __file__, 1, "unhandled error",
                                 (), exc_info=sys.exc_info())
    raise AssertionError("unreachable")


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter("%(message)s")],
                         ids=["json", "text"])
def test_an_exception_is_logged_with_its_type_and_stack_but_not_its_message(formatter):
    out = formatter.format(_record())
    assert SECRET not in out and CARD not in out
    # What an operator needs is still there: the types of the chain and where it happened.
    assert "ValueError" in out and "KeyError" in out
    assert "_raise_chained" in out
    assert "unhandled error" in out


def test_json_formatter_names_the_exception_type():
    out = orjson.loads(JsonFormatter().format(_record()))
    assert out["exc_type"] == "ValueError"
    assert out["level"] == "error"


def test_text_formatter_ignores_a_traceback_another_formatter_cached():
    record = _record()
    logging.Formatter().format(record)  # caches the full text, messages included
    assert SECRET in record.exc_text
    assert SECRET not in TextFormatter("%(message)s").format(record)


def test_driver_debug_logs_stay_off_whatever_the_service_level():
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure("DEBUG", "json")
        # The driver logs statements and their parameters at DEBUG.
        assert not logging.getLogger("neo4j").isEnabledFor(logging.DEBUG)
        assert not logging.getLogger("neo4j.io").isEnabledFor(logging.INFO)
        assert logging.getLogger("neo4j").isEnabledFor(logging.WARNING)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
