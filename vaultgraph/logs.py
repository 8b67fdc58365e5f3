"""Structured logs: one JSON object a line, each carrying the request's trace id.

Log records carry ids, counts and timings only — never token data (see README, Security).
"""

from __future__ import annotations

import contextvars
import logging
import sys
import time
import traceback

import orjson

trace_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("trace_id", default=None)

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        trace = trace_id_var.get()
        if trace:
            out["trace_id"] = trace
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc_type"] = record.exc_info[0].__name__ if record.exc_info[0] else None
            out["stack"] = format_exception_safely(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        trace = trace_id_var.get()
        # Never reuse a traceback text another formatter cached on the record (with messages).
        record = logging.makeLogRecord({**vars(record), "exc_text": None})
        base = super().format(record)
        return f"{base} trace_id={trace}" if trace else base

    def formatException(self, ei) -> str:
        return format_exception_safely(ei)


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


def configure(level: str = "INFO", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The driver logs query text at DEBUG; keep it quiet whatever the service level is.
    logging.getLogger("neo4j").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
