"""`?size=` and `?start=<opaque cursor>`, shared by every list route, the one check of a page
size (a query's or a search body's), and the list body."""

from __future__ import annotations

from typing import Any

from multidict import MultiMapping

from ..errors import invalid
from ..pagination import Page, decode_cursor, encode_cursor
from ..settings import Settings


def page_from_query(query: MultiMapping[str], settings: Settings,
                    cursor_type: type = object) -> Page:
    """The page a list route was asked for; `cursor_type` is the shape its cursors have."""
    size = page_size(query.get("size"), settings)
    start = query.get("start")
    after = decode_cursor(start) if start else None
    if start and not isinstance(after, cursor_type):
        raise invalid("start", "is not a cursor this service issued")
    return Page(size=size, after=after)


def page_size(value: str | int | None, settings: Settings) -> int:
    """The page size asked for: `value` from a query string (digits) or a JSON body (a whole
    number); None is the default. Anything but a whole number from 1 to `page_size_max` is a
    400 naming `size`."""
    if value is None:
        return settings.page_size_default
    if isinstance(value, str):
        value = int(value) if value.isascii() and value.isdigit() else None
    if isinstance(value, bool) or not isinstance(value, int) \
            or not 1 <= value <= settings.page_size_max:
        raise invalid("size", f"must be a whole number from 1 to {settings.page_size_max}")
    return value


def page_body(items: list[dict], page: Page, next_cursor: Any | None) -> dict:
    return {
        "pagination": {
            "page_size": page.size,
            "next": encode_cursor(next_cursor) if next_cursor is not None else None,
        },
        "data": items,
    }
