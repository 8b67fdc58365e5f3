"""Cursor pagination: `?size=` and `?start=<opaque cursor>`, shared by every list route."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson
from multidict import MultiMapping

from . import problems
from .settings import Settings


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
        raise problems.invalid("start", "is not a cursor this service issued") from None


def page_from_query(query: MultiMapping[str], settings: Settings,
                    cursor_type: type = object) -> Page:
    """The page a list route was asked for; `cursor_type` is the shape its cursors have."""
    raw = query.get("size")
    size = settings.page_size_default
    if raw is not None:
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= settings.page_size_max:
            raise problems.invalid("size", f"must be a whole number from 1 to "
                                           f"{settings.page_size_max}")
        size = int(raw)
    start = query.get("start")
    after = decode_cursor(start) if start else None
    if start and not isinstance(after, cursor_type):
        raise problems.invalid("start", "is not a cursor this service issued")
    return Page(size=size, after=after)


def page_body(items: list[dict], page: Page, next_cursor: Any | None) -> dict:
    return {
        "pagination": {
            "page_size": page.size,
            "next": encode_cursor(next_cursor) if next_cursor is not None else None,
        },
        "data": items,
    }
