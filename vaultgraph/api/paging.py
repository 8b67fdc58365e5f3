"""`?size=` and `?start=<opaque cursor>`, shared by every list route, and the list body."""

from __future__ import annotations

from typing import Any

from multidict import MultiMapping

from ..errors import invalid
from ..pagination import Page, decode_cursor, encode_cursor
from ..settings import Settings


def page_from_query(query: MultiMapping[str], settings: Settings,
                    cursor_type: type = object) -> Page:
    """The page a list route was asked for; `cursor_type` is the shape its cursors have."""
    raw = query.get("size")
    size = settings.page_size_default
    if raw is not None:
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= settings.page_size_max:
            raise invalid("size", f"must be a whole number from 1 to "
                                           f"{settings.page_size_max}")
        size = int(raw)
    start = query.get("start")
    after = decode_cursor(start) if start else None
    if start and not isinstance(after, cursor_type):
        raise invalid("start", "is not a cursor this service issued")
    return Page(size=size, after=after)


def page_body(items: list[dict], page: Page, next_cursor: Any | None) -> dict:
    return {
        "pagination": {
            "page_size": page.size,
            "next": encode_cursor(next_cursor) if next_cursor is not None else None,
        },
        "data": items,
    }
