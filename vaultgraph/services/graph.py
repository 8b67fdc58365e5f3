"""Token graph use cases: links, child tokens, neighbours and traversal (docs/graph.md).

Whatever the caller may not read is absent, never refused: an end of a link, a listed token or
a traversed one that is unknown, expired, outside the caller's rules or in another tenant
answers 404 like an unknown token (the same body), or is left out of a list.
"""

from __future__ import annotations

from ..audit.context import expect
from ..auth.permissions import TOKEN_DELETE, TOKEN_READ
from ..auth.principal import Principal
from ..errors import Invalid, NotFound
from ..pagination import Page
from ..repository.graph import GraphRepository
from ..tokens import view
from ..tokens.fields import format_stored_text
from .tokens import NOT_FOUND, Listing, TokenService

NO_LINK = "No link from that parent token to that child token."
SELF_LINK = "A token cannot be its own child."

DIRECTIONS = ("children", "parents", "both")
DEFAULT_DIRECTION = "children"
MIN_DEPTH, MAX_DEPTH, DEFAULT_DEPTH = 1, 5, 2
# Bounds of one traversal: tokens in the answer, and links read per level.
MAX_NODES = 500
MAX_LINKS_PER_LEVEL = 2000


class GraphService:
    def __init__(self, repo: GraphRepository, tokens: TokenService):
        self.repo = repo
        self.tokens = tokens

    async def link(self, principal: Principal, parent_id: str, child_id: str) -> dict | None:
        """The new link's body, or None when it was already there (idempotent)."""
        if parent_id == child_id:
            raise Invalid(SELF_LINK)
        link = await self.repo.link(tenant_id=principal.tenant_id, parent_id=parent_id,
                                    child_id=child_id, prefixes=principal.prefixes(TOKEN_READ),
                                    actor=principal.application_id)
        if link is None:
            raise NotFound(NOT_FOUND)
        if not link.created:
            return None
        return {"parent_id": parent_id, "child_id": child_id,
                "created_at": format_stored_text(link.created_at)}

    async def unlink(self, principal: Principal, parent_id: str, child_id: str) -> None:
        if parent_id == child_id:
            raise Invalid(SELF_LINK)
        expect(204)  # the write may store its event as the request ends (a 404 ends otherwise)
        removed = await self.repo.unlink(tenant_id=principal.tenant_id, parent_id=parent_id,
                                         child_id=child_id,
                                         prefixes=principal.prefixes(TOKEN_DELETE),
                                         actor=principal.application_id)
        if removed is None:
            raise NotFound(NOT_FOUND)
        if not removed:
            raise NotFound(NO_LINK)

    async def create_child(self, principal: Principal, parent_id: str,
                           body: dict) -> tuple[dict, bool]:
        """The child's body in the child-token shape (no data), and whether dedup returned an
        existing token. Token and link are written by one statement: both or neither."""
        # The child shape never shows data or mask: the answer is built without rendering them.
        created, deduplicated = await self.tokens.create(principal, body, parent_id=parent_id,
                                                         shows_data=False)
        out = view.child_view(created)
        if "_extras" in created:
            out["_extras"] = created["_extras"]
        return out, deduplicated

    async def children(self, principal: Principal, parent_id: str, page: Page, *,
                       ids: list[str], types: list[str]) -> Listing:
        return await self._neighbours(self.repo.children, principal, parent_id, page, ids,
                                      types)

    async def parents(self, principal: Principal, child_id: str, page: Page, *,
                      ids: list[str], types: list[str]) -> Listing:
        return await self._neighbours(self.repo.parents, principal, child_id, page, ids, types)

    async def _neighbours(self, fetch, principal: Principal, token_id: str, page: Page,
                          ids: list[str], types: list[str]) -> Listing:
        after = page.after or ""
        nodes = await fetch(
            tenant_id=principal.tenant_id, id=token_id,
            prefixes=principal.prefixes(TOKEN_READ), after=after, limit=page.size + 1,
            ids=ids or None, types=types or None)
        if nodes is None:
            raise NotFound(NOT_FOUND)
        return await self.tokens.listing(principal, nodes, page)

    async def graph(self, principal: Principal, token_id: str, *, depth: int,
                    direction: str) -> dict:
        sub = await self.repo.traverse(
            tenant_id=principal.tenant_id, id=token_id, prefixes=principal.prefixes(TOKEN_READ),
            depth=depth, direction=direction, max_nodes=MAX_NODES,
            max_links=MAX_LINKS_PER_LEVEL)
        if sub is None:
            raise NotFound(NOT_FOUND)
        return {
            "root": token_id,
            "depth": depth,
            "direction": direction,
            "nodes": await self.tokens.present_all(principal, sub.tokens),
            "edges": [{"parent_id": parent, "child_id": child}
                      for parent, child in sorted(set(sub.links))],
            "truncated": sub.truncated,
        }
