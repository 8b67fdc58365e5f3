"""Cursor pagination shared by every list: a page size and an opaque cursor (the last position
seen, encoded). The HTTP side (`?size=`, `?start=`) is api/paging.py."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import invalid


@dataclass(frozen=True)
class Page:
    size: int
    after: Any  # the decoded cursor, or None for the first page


def encode_cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()


def decode_cursor(cursor: str) -> Any:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return orjson.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeEncodeError, orjson.JSONDecodeError):
        raise invalid("start", "is not a cursor this service issued") from None
