"""The search request body (`POST /tokens/search`) and its cursor."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from marshmallow import RAISE, Schema, fields

from ..errors import invalid

_EXAMPLE = 'type:card AND descendant:cust-ada AND metadata.status:active'
# created_at as Neo4j prints it (up to nanoseconds), as the statement hands it back.
_POSITION = re.compile(
    r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?)(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")


class PageSize(fields.Integer):
    """A page size in a body (an integer in the document), passed on as the JSON gave it: the
    one check of a page size (api/paging.py `page_size`) refuses what is not a whole number in
    range, with the message a query's `size` gets. marshmallow's own type check would say
    "Not a valid integer." for `"ten"` and the range message for `0`."""

    def _deserialize(self, value, attr, data, **kwargs):
        return value


class SearchBodySchema(Schema):
    class Meta:
        unknown = RAISE

    query = fields.String(required=True, metadata={
        "description": "The query (docs/search.md): `field:value` terms, `AND` / `OR` / `NOT`, "
                       "parentheses, date ranges `[a TO b]`.",
        "example": _EXAMPLE, "minLength": 1,
        "limits": {"maxLength": "search_max_query_length"}})
    size = PageSize(allow_none=True, metadata={
        "description": "Items per page; null or absent: the default.", "minimum": 1,
        "limits": {"maximum": "page_size_max", "default": "page_size_default"}})
    start = fields.String(allow_none=True, metadata={
        "description": "The `pagination.next` cursor of the previous page (opaque).",
        "pattern": "^[A-Za-z0-9_-]*$"})


def search_cursor(after: Any) -> tuple[str, str]:
    """A decoded search cursor: [created_at, id] of the last token shown."""
    if (isinstance(after, list) and len(after) == 2 and all(isinstance(x, str) for x in after)
            and (match := _POSITION.match(after[0]))):
        try:
            datetime.fromisoformat(match.group(1))
        except ValueError:
            pass
        else:
            return after[0], after[1]
    raise invalid("start", "is not a cursor this service issued")
