"""Search: parse the query, blind its `data` values, plan it, seek, present like a list.

A token is found when the caller holds `token:search` on it (the first rule by priority that
grants `token:search` and covers one of its containers), and it is shown under that rule's
transform, rendered by the token service exactly as a list renders it. Tokens outside those
rules or the tenant are neither returned nor counted: the statement filters them before the
page is cut.

A search weighs its number of terms in the caller's rate limit (`Plan.terms`; the route
charges it once the query is planned).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..auth.permissions import TOKEN_SEARCH
from ..auth.principal import Principal
from ..errors import invalid
from ..pagination import Page
from ..repository.search import SearchRepository
from ..search import BLIND_INDEX
from ..search.plan import UNINDEXED, Plan, compile
from ..search.query import QUERY_FIELD, Limits, Term, parse, with_values
from ..settings import Settings
from .tokens import TokenService, meta_kvs


@dataclass(frozen=True)
class Results:
    items: list[dict]
    next_after: list[str] | None  # [created_at, id] of the page's last token when more follow


class SearchService:
    def __init__(self, repo: SearchRepository, tokens: TokenService, settings: Settings):
        self.repo = repo
        self.tokens = tokens
        self.limits = Limits(max_length=settings.search_max_query_length,
                             max_terms=settings.search_max_terms,
                             max_depth=settings.search_max_depth)

    def plan(self, principal: Principal, query: str) -> Plan:
        """The query parsed, its values in stored form and its plan; a 400 on `query` when it
        is malformed, over a limit, or no index can answer it. Nothing is read yet."""
        def stored_form(term: Term) -> str:
            if term.field == "data":  # only the keyed HMAC leaves the process
                return principal.keys.index_value(BLIND_INDEX, term.value)
            if term.field == "metadata":
                return meta_kvs({term.key or "": term.value})[0]
            return term.value

        plan = compile(with_values(parse(query, self.limits), stored_form))
        if plan is None:
            raise invalid(QUERY_FIELD, UNINDEXED)
        return plan

    async def search(self, principal: Principal, plan: Plan, page: Page) -> Results:
        hits = await self.repo.page(
            tenant_id=principal.tenant_id, prefixes=principal.prefixes(TOKEN_SEARCH),
            plan=plan, after=page.after, limit=page.size + 1)
        shown = hits[:page.size]
        items = await self.tokens.present_all(principal, [h.token for h in shown],
                                              operation=TOKEN_SEARCH)
        more = len(hits) > page.size
        return Results(items, [shown[-1].position, shown[-1].token.id] if more else None)
