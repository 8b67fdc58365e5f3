"""Logs carry ids, counts, timings and stacks: never an exception's message, which may quote
a request (aiohttp's parser errors quote the raw header or body bytes) or driver text."""

from __future__ import annotations

import logging
import sys

import orjson
import pytest

from vaultgraph.logging_setup import CoalescingFilter, JsonFormatter, TextFormatter, configure

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


# --- coalescing repeated errors -------------------------------------------------------------

class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(records, flt) -> list[logging.LogRecord]:
    return [record for record in records if flt.filter(record)]


def _driver_record(attempt: int, level: int = logging.ERROR) -> logging.LogRecord:
    # The driver's routing logger formats ids and addresses into one template.
    return logging.makeLogRecord({
        "name": "neo4j.pool", "levelno": level, "levelname": logging.getLevelName(level),
        "msg": "[#%04X]  _: <POOL> failed to fetch routing info from %r", "args": (attempt,
                                                                                   "10.0.0.1")})


def test_repeated_errors_of_one_cause_are_one_line_per_interval_with_a_count():
    # Seen failing before the filter existed: 8,400 lines for a 40 s outage.
    clock = _Clock()
    flt = CoalescingFilter(10.0, clock=clock)
    written = []
    for second in range(40):
        clock.now = 1000.0 + second
        written += _lines([_driver_record(i) for i in range(210)], flt)
    assert len(written) == 4  # seconds 0, 10, 20, 30
    assert not hasattr(written[0], "repeated")
    assert [r.repeated for r in written[1:]] == [2099, 2099, 2099]


def test_distinct_causes_and_info_lines_are_not_coalesced():
    clock = _Clock()
    flt = CoalescingFilter(10.0, clock=clock)
    warning = logging.makeLogRecord({"name": "vaultgraph.http", "levelno": logging.WARNING,
                                     "msg": "database unavailable"})
    info = [logging.makeLogRecord({"name": "vaultgraph.http", "levelno": logging.INFO,
                                   "msg": "request"}) for _ in range(5)]
    written = _lines([_driver_record(1), warning, _driver_record(2, logging.WARNING), *info,
                      warning, _driver_record(3)], flt)
    assert len(written) == 3 + 5


def test_the_count_reaches_the_json_and_text_lines():
    clock = _Clock()
    flt = CoalescingFilter(10.0, clock=clock)
    _lines([_driver_record(i) for i in range(3)], flt)
    clock.now += 10
    record = _driver_record(9)
    assert flt.filter(record)
    assert orjson.loads(JsonFormatter().format(record))["repeated"] == 2
    assert "repeated=2" in TextFormatter("%(message)s").format(record)


def test_configure_puts_the_filter_on_the_handler_and_zero_turns_it_off():
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure("INFO", "json")
        assert any(isinstance(f, CoalescingFilter) and f.interval == 10.0
                   for f in root.handlers[0].filters)
        configure("INFO", "json", coalesce_interval=0)
        flt = next(f for f in root.handlers[0].filters if isinstance(f, CoalescingFilter))
        assert all(flt.filter(_driver_record(i)) for i in range(3))
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def test_the_text_format_keeps_the_structured_fields_on_the_line():
    """What the JSON line carries as fields, the text line carries as key=value after the
    message (the request log line used to read just `INFO vaultgraph.http request`)."""
    record = logging.makeLogRecord({
        "name": "vaultgraph.http", "levelno": logging.INFO, "levelname": "INFO",
        "msg": "request", "method": "GET", "route": "/tokens/{id}", "status": 200, "ms": 1.5,
        "application_id": None, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"})
    assert TextFormatter("%(levelname)s %(name)s %(message)s").format(record) == (
        "INFO vaultgraph.http request method=GET route=/tokens/{id} status=200 ms=1.5 "
        "application_id=null trace_id=4bf92f3577b34da6a3ce929d0e0e4736")
    unavailable = logging.makeLogRecord({"name": "vaultgraph.db", "levelno": logging.WARNING,
                                         "msg": "neo4j unavailable",
                                         "error": "ServiceUnavailable", "note": "two words"})
    assert TextFormatter("%(message)s").format(unavailable) == (
        'neo4j unavailable error=ServiceUnavailable note="two words"')


def test_the_text_format_puts_the_fields_before_the_traceback():
    record = _record()
    record.status = 500
    lines = TextFormatter("%(message)s").format(record).splitlines()
    assert lines[0] == "unhandled error status=500"
    assert lines[1] == "Traceback (most recent call last):"


def test_a_records_fields_are_written_in_the_order_given_and_only_its_own():
    logger = logging.getLogger("vaultgraph.test")
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "request", (),
                               None, extra={"method": "GET", "route": "/tokens/{id}",
                                            "status": 200, "ms": 1.5, "_hidden": 1})
    logging.Formatter("%(asctime)s %(message)s").format(record)  # sets message and asctime
    record.repeated = 3  # as the coalescing filter adds it, after the record was made
    fields = ["method", "route", "status", "ms", "repeated"]
    out = orjson.loads(JsonFormatter().format(record))
    assert list(out) == ["ts", "level", "logger", "msg", *fields]
    assert [out[k] for k in fields] == ["GET", "/tokens/{id}", 200, 1.5, 3]
    assert TextFormatter("%(message)s").format(record) == (
        "request method=GET route=/tokens/{id} status=200 ms=1.5 repeated=3")
    # A record made from a dict (a record from another process) keeps its fields too.
    copied = logging.makeLogRecord({**vars(record)})
    assert orjson.loads(JsonFormatter().format(copied))["repeated"] == 3


def test_the_time_is_utc_to_the_millisecond_across_seconds():
    formatter = JsonFormatter()
    logger = logging.getLogger("vaultgraph.test")
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "x", (), None)
    for created, text in [(1_764_720_000.0, "2025-12-03T00:00:00.000Z"),
                          (1_764_720_000.9994, "2025-12-03T00:00:00.999Z"),
                          (1_764_720_001.25, "2025-12-03T00:00:01.250Z"),
                          (1_764_720_000.5, "2025-12-03T00:00:00.500Z"),
                          (1_764_806_399.0015, "2025-12-03T23:59:59.001Z")]:
        record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0
        assert orjson.loads(formatter.format(record))["ts"] == text
