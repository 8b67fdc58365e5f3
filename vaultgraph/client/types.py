"""The shapes the service answers with (docs/tokens-and-expressions.md, docs/graph.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

import orjson

Direction = Literal["children", "parents", "both"]


class Token(TypedDict):
    id: str
    type: str
    containers: list[str]
    metadata: dict[str, str]
    created_by: NotRequired[str | None]
    created_at: NotRequired[str]
    expires_at: NotRequired[str | None]
    modified_by: NotRequired[str | None]
    modified_at: NotRequired[str | None]
    data: NotRequired[Any]
    mask: NotRequired[Any]
    fingerprint: NotRequired[str | None]
    fingerprint_expression: NotRequired[str | None]
    search_indexes: NotRequired[list[str]]


class Pagination(TypedDict):
    page_size: int
    next: str | None


class TokenPage(TypedDict):
    pagination: Pagination
    data: list[Token]


class Link(TypedDict):
    parent_id: str
    child_id: str
    created_at: NotRequired[str]


class Graph(TypedDict):
    root: str
    depth: int
    direction: Direction
    nodes: list[Token]
    edges: list[Link]
    truncated: NotRequired[bool]


class AuditEvent(TypedDict):
    id: str
    at: str
    tenant_id: str | None
    application_id: str | None
    key_id: str | None
    operation: str | None
    route: str | None
    token_ids: list[str]
    outcome: str
    status: int | None
    transform: str | None
    trace_id: str | None
    reason: str | None


class AuditPage(TypedDict):
    pagination: Pagination
    data: list[AuditEvent]


class Proxy(TypedDict, total=False):
    id: str
    name: str
    destination_url: str
    description: str | None
    header_allowlist: list[str]
    created_at: str
    created_by: str | None
    modified_at: str


class ProxyPage(TypedDict):
    pagination: Pagination
    data: list[Proxy]


@dataclass(frozen=True)
class ProxyResponse:
    """The destination's answer to a call through a proxy: whatever its status (a 4xx or 5xx
    of the destination is not raised; the vault's own refusals are)."""

    status: int
    content_type: str | None
    content: bytes = field(repr=False)

    def json(self) -> Any:
        return orjson.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode()
