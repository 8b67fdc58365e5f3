"""The schemas the HTTP layer shares: problems, pages, links and graphs, and the parameters in
paths and query strings. Token and application bodies live beside their request schemas
(tokens/schemas.py, applications/schemas.py).

Query and path schemas only describe: the handlers parse (api/paging.py, api/graph.py) with the
messages the suite fixes; a test holds the two together.
"""

from __future__ import annotations

from typing import ClassVar

from marshmallow import Schema, fields

from ..applications.schemas import ApplicationBodySchema
from ..services.graph import (
    DEFAULT_DEPTH,
    DEFAULT_DIRECTION,
    DIRECTIONS,
    MAX_DEPTH,
    MAX_LINKS_PER_LEVEL,
    MAX_NODES,
    MIN_DEPTH,
)
from ..tokens.schemas import DATE_TIME, TOKEN_ID_SCHEMA, UUID, TokenSchema


class StatusSchema(Schema):
    status = fields.String(required=True)


class PaginationSchema(Schema):
    page_size = fields.Integer(required=True, metadata={"minimum": 1})
    next = fields.String(required=True, allow_none=True, metadata={
        "description": "Cursor of the next page (pass it as `start`); null on the last."})


def page_of(item: type[Schema], name: str) -> type[Schema]:
    """The schema of a page of `item`s: the one shape every paged list answers with."""
    return Schema.from_dict({
        "pagination": fields.Nested(PaginationSchema, required=True),
        "data": fields.List(fields.Nested(item), required=True),
    }, name=name)


TokenPageSchema = page_of(TokenSchema, "TokenPageSchema")
ApplicationPageSchema = page_of(ApplicationBodySchema, "ApplicationPageSchema")


class AssociationSchema(Schema):
    """A parent → child link."""

    parent_id = fields.String(required=True)
    child_id = fields.String(required=True)
    created_at = fields.String(required=True, metadata={
        **DATE_TIME, "description": "When the link was made."})


class EdgeSchema(Schema):
    parent_id = fields.String(required=True)
    child_id = fields.String(required=True)


class TokenGraphSchema(Schema):
    """Tokens linked to a token within `depth` links, and the links among them."""

    root = fields.String(required=True, metadata={"description": "The token asked for."})
    depth = fields.Integer(required=True, metadata={"minimum": MIN_DEPTH, "maximum": MAX_DEPTH})
    direction = fields.String(required=True, metadata={"enum": list(DIRECTIONS)})
    nodes = fields.List(fields.Nested(TokenSchema), required=True, metadata={
        "description": "The root first, then breadth first; each token shown per the caller's "
                       "access rules. Tokens it may not read are absent, and so is whatever is "
                       "reachable only through them."})
    edges = fields.List(fields.Nested(EdgeSchema), required=True, metadata={
        "description": "The links among the tokens in `nodes`, each once."})
    truncated = fields.Boolean(required=True, metadata={
        "description": f"True when a bound cut the answer: at most {MAX_NODES} tokens, and at "
                       f"most {MAX_LINKS_PER_LEVEL} links read per level."})


# -- parameters ----------------------------------------------------------------------------------

def _token_id(description: str) -> fields.String:
    return fields.String(required=True, metadata={**TOKEN_ID_SCHEMA, "description": description})


def path(**params: fields.Field) -> type[Schema]:
    return Schema.from_dict(params)


TOKEN_PATH = path(id=_token_id("Token id."))
LINK_PATH = path(parent_id=_token_id("Parent token id."), child_id=_token_id("Child token id."))
PARENT_PATH = path(parent_id=_token_id("Parent token id."))
APPLICATION_PATH = path(id=fields.String(required=True, metadata={
    **UUID, "description": "Application id."}))
KEY_PATH = path(
    id=fields.String(required=True, metadata={**UUID, "description": "Application id."}),
    key_id=fields.String(required=True, metadata={**UUID, "description": "API key id."}))


class PageQuery(Schema):
    size = fields.Integer(metadata={
        "description": "Items per page.", "minimum": 1,
        "limits": {"maximum": "page_size_max", "default": "page_size_default"}})
    start = fields.String(metadata={
        "description": "The `pagination.next` cursor of the previous page (opaque).",
        "pattern": "^[A-Za-z0-9_-]*$"})


class TokenFilterQuery(Schema):
    id = fields.List(fields.String(metadata=TOKEN_ID_SCHEMA), metadata={
        "description": "Only these token ids; one that is not a token id is a 400."})
    type = fields.List(fields.String(), metadata={"description": "Only these token types."})


class TokenListQuery(TokenFilterQuery):
    """`GET /tokens`'s filters: its ids and types, and `metadata.<key>=<value>`."""
    QUERY_PREFIXES: ClassVar[tuple[str, ...]] = ("metadata.",)


class GraphQuery(Schema):
    depth = fields.Integer(metadata={
        "description": "Links to follow from the token.", "minimum": MIN_DEPTH,
        "maximum": MAX_DEPTH, "default": DEFAULT_DEPTH})
    direction = fields.String(metadata={
        "description": "`children`: parent → child; `parents`: child → parent; `both`: links "
                       "followed either way.",
        "enum": list(DIRECTIONS), "default": DEFAULT_DIRECTION})
