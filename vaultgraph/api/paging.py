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
    size = page_size(_whole_number(query.get("size")), settings)
    start = query.get("start")
    after = decode_cursor(start) if start else None
    if start and not isinstance(after, cursor_type):
        raise invalid("start", "is not a cursor this service issued")
    return Page(size=size, after=after)


# More digits than any page size has: left as text (refused by page_size), never read as a
# number (Python refuses to read one of over 4,300 digits with a ValueError: a 500).
_MAX_DIGITS = 18


def _whole_number(text: str | None) -> int | str | None:
    """A query's ASCII digits as the number they write; other text as it is (page_size
    refuses it)."""
    if text is not None and len(text) <= _MAX_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    return text


def page_size(value: object, settings: Settings) -> int:
    """The page size asked for: a whole number (a query string's digits, read by
    page_from_query, or a JSON body's number, passed on as given by the search body's
    `PageSize`); None is the default. Anything else, text or a number out of 1 to
    `page_size_max`, is a 400 naming `size`, with the one message wherever it is given."""
    if value is None:
        return settings.page_size_default
    if type(value) is not int or not 1 <= value <= settings.page_size_max:
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
