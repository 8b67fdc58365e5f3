"""Structured logs: one JSON object a line, each carrying the request's trace id.

Log records carry ids, counts and timings only — never token data (see docs/security.md).
"""

from __future__ import annotations

import contextvars
import logging
import sys
import time
import traceback

import orjson

trace_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("trace_id", default=None)

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "trace_id"}
# What every record holds once made (the trace id this module's factory adds included): what
# follows them in a record's attributes was added after, by `extra=` or a filter.
_MADE = frozenset(vars(logging.makeLogRecord({}))) | {"trace_id"}
_base_factory = logging.getLogRecordFactory()


def _record_with_trace(*args, **kwargs) -> logging.LogRecord:
    """Every record is stamped with the trace id of the request it was written in, when it is
    made (a handler may format it later, outside the request's context)."""
    record = _base_factory(*args, **kwargs)
    record.trace_id = trace_id_var.get()
    return record


if getattr(_base_factory, "__name__", "") != "_record_with_trace":
    logging.setLogRecordFactory(_record_with_trace)


def _trace_of(record: logging.LogRecord) -> str | None:
    return getattr(record, "trace_id", None) or trace_id_var.get()


def _fields(record: logging.LogRecord) -> list[str]:
    """The names of the record's structured fields (its `extra=`, a filter's `repeated`), in
    the order they were added. They follow what every record holds once made, so the look
    starts from the end and stops at the first of those: one line a request is written, and
    its record holds some 25 attributes."""
    found: list[str] = []
    for key in reversed(record.__dict__):
        if key in _MADE:
            break
        if key not in _STANDARD and not key.startswith("_"):
            found.append(key)
    found.reverse()
    return found


class JsonFormatter(logging.Formatter):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._second = (-1, "")  # the last second formatted, and its text

    def _timestamp(self, record: logging.LogRecord) -> str:
        """ISO 8601 in UTC to the millisecond; the text of a second is made once."""
        second, text = self._second
        if int(record.created) != second:
            second = int(record.created)
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        return f"{text}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": self._timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        trace = _trace_of(record)
        if trace:
            out["trace_id"] = trace
        values = record.__dict__
        for key in _fields(record):
            out[key] = values[key]
        if record.exc_info:
            out["exc_type"] = record.exc_info[0].__name__ if record.exc_info[0] else None
            out["stack"] = format_exception_safely(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class TextFormatter(logging.Formatter):
    """The message, then the record's structured fields as `key=value` (those the JSON
    formatter writes: method, route, status, ms, error type, repeated, ...), the trace id last;
    a traceback follows on the next lines."""

    def format(self, record: logging.LogRecord) -> str:
        values = record.__dict__
        fields = [(key, values[key]) for key in _fields(record)]
        trace = _trace_of(record)
        if trace:
            fields.append(("trace_id", trace))
        line = record.getMessage() + "".join(f" {key}={_text_value(value)}"
                                             for key, value in fields)
        # Never reuse a traceback text another formatter cached on the record (with messages).
        record = logging.makeLogRecord({**vars(record), "msg": line, "args": None,
                                        "exc_text": None})
        return super().format(record)

    def formatException(self, ei) -> str:
        return format_exception_safely(ei)


def _text_value(value) -> str:
    """A field's value on a text line: as is when it is one word, else quoted as JSON."""
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    if isinstance(value, str) and (not text or any(c.isspace() or c in '"=' for c in text)):
        return orjson.dumps(text).decode()
    return text


def format_exception_safely(exc_info) -> str:
    """A traceback of the exception and its causes: frames and type names, never messages.

    Messages can quote what the service was handling: aiohttp's parser errors quote raw header
    and body bytes (an API key, token data), driver errors quote server text.
    """
    exc = exc_info[1]
    chain: list[BaseException] = []
    while exc is not None and not any(exc is seen for seen in chain):  # cycles end
        chain.append(exc)
        exc = exc.__cause__ if exc.__cause__ is not None or exc.__suppress_context__ \
            else exc.__context__
    parts = []
    for exc in reversed(chain):  # the first cause first, as Python prints it
        if parts:
            parts.append("\nwhich led to:\n")
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_tb(exc.__traceback__))
        parts.append(f"{type(exc).__module__}.{type(exc).__qualname__}\n")
    return "".join(parts).rstrip("\n")


class CoalescingFilter(logging.Filter):
    """One line per cause per interval: repeats of a WARNING or worse are counted, not written.

    A cause is the logger, the level, the message template (before its arguments are put in:
    the driver's carry connection ids and addresses) and the exception type. The first record
    of a cause passes; the rest within `interval` seconds are held back and counted; the first
    one after it passes with `repeated`, the number held back since the last line written.
    A Neo4j outage otherwise writes thousands of identical lines (the driver's routing logger
    on every attempt, and a warning per request).
    """

    MAX_CAUSES = 1_024

    def __init__(self, interval: float = 10.0, *, level: int = logging.WARNING,
                 clock=time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self.level = level
        self._clock = clock
        self._causes: dict[tuple, list] = {}  # cause → [time of its last line, held back]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.interval <= 0 or record.levelno < self.level:
            return True
        exc_type = record.exc_info[0] if record.exc_info else None
        cause = (record.name, record.levelno, str(record.msg), exc_type)
        now = self._clock()
        seen = self._causes.get(cause)
        if seen is not None and now - seen[0] < self.interval:
            seen[1] += 1
            return False
        if seen is not None and seen[1]:
            record.repeated = seen[1]
        if seen is None and len(self._causes) >= self.MAX_CAUSES:
            # Forget causes whose interval is over (their held-back count is lost), else all.
            for key in [k for k, v in self._causes.items() if now - v[0] >= self.interval]:
                del self._causes[key]
            if len(self._causes) >= self.MAX_CAUSES:
                self._causes.clear()
        self._causes[cause] = [now, 0]
        return True


def configure(level: str = "INFO", fmt: str = "json", coalesce_interval: float = 10.0) -> None:
    """Log to stderr; repeated warnings and errors are coalesced over `coalesce_interval`
    seconds (VAULTGRAPH_LOG_COALESCE_INTERVAL; 0 turns coalescing off)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(CoalescingFilter(coalesce_interval))
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"))
    # Records keep only what the formatters write: not the caller's file, function and line
    # (finding them walks the stack on every record), nor thread and process names. One
    # record is made per request (its log line); these cost it more than formatting it.
    logging._srcfile = None  # the logging documentation's own switch for the caller look-up
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The driver logs query text at DEBUG; keep it quiet whatever the service level is.
    logging.getLogger("neo4j").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
