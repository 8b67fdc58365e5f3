"""`POST /tokens/search`: declare, parse the body, call the search service."""

from __future__ import annotations

from aiohttp import web

from ..auth.permissions import TOKEN_SEARCH
from ..pagination import Page, decode_cursor
from ..search.schemas import SearchBodySchema, search_cursor
from . import ratelimit
from .endpoints import Body, Endpoints, Reply
from .loading import compile_loader
from .paging import page_body, page_size
from .request_io import principal, read_object
from .schemas import TokenPageSchema
from .typedefs import services_key, settings_key

endpoints = Endpoints()
# What SearchBodySchema().load gives, compiled once (loading.py).
load_search = compile_loader(SearchBodySchema)


@endpoints.post(
    "/tokens/search", operation_id="searchTokens", summary="Search tokens", tag="Tokens",
    access=(TOKEN_SEARCH,),
    description="Tokens matching the query, newest first, each shown under the transform of "
                "the caller's first rule that grants `token:search` on it; tokens outside "
                "those rules are neither returned nor counted. Fields: `id`, `type`, "
                "`container` (prefix), `fingerprint`, `metadata.<key>` (exact, "
                "case-insensitive), `created_at`, `expires_at` (dates and ranges), `data` "
                "(the token's search index values, blind-indexed), and the graph's `parent`, "
                "`child`, `ancestor`, `descendant` (up to 5 links). A malformed query is a 400 "
                "naming the position; a query no index can answer is a 400 too. A search "
                "weighs its number of terms in the application's rate limit.",
    body=Body(SearchBodySchema, "The query and the page wanted."),
    replies=(Reply(200, "A page of tokens, newest first.", TokenPageSchema),), reads_only=True)
async def search_tokens(request: web.Request):
    body = load_search(await read_object(request))
    size = page_size(body.get("size"), request.app[settings_key])
    start = body.get("start")
    page = Page(size=size, after=search_cursor(decode_cursor(start)) if start else None)
    search, caller = request.app[services_key].search, principal(request)
    plan = search.plan(caller, body["query"])
    # A search weighs its number of terms: the request paid for one, the rest is paid here,
    # before the database is asked.
    ratelimit.charge(request, plan.terms - 1)
    results = await search.search(caller, plan, page)
    return page_body(results.items, page, results.next_after)
