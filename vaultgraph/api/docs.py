"""The published OpenAPI document and the API reference page (Redoc, vendored, no CDN)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
from aiohttp import web

from ..auth.permissions import PUBLIC
from ..settings import Settings
from . import openapi
from .endpoints import Endpoint, Endpoints, Reply
from .typedefs import SLASH_STRIPPED, openapi_key, settings_key

endpoints = Endpoints()
TAG = "Operations"

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
REDOC_BUNDLE = STATIC_DIR / "redoc.standalone.js"
REDOC_VERSION = "3.0.1"  # also in static/README.md; a test reads the bundle's own header
REDOC_URL = "/static/redoc.standalone.js"

# Redoc injects its styles (styled-components) and sets inline style attributes, hence
# 'unsafe-inline' for styles only; scripts come from this origin alone, and connect-src 'self'
# keeps the page from sending anything anywhere but here (Redoc's telemetry included).
DOCS_CSP = "; ".join((
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
))
DOCS_HTML = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vaultgraph API</title>
</head>
<body>
<noscript>The API reference needs JavaScript; the document itself is
<a href="openapi.json">openapi.json</a>.</noscript>
<redoc spec-url="openapi.json" disable-telemetry="true"></redoc>
<script type="module" src="{REDOC_URL.lstrip("/")}?v={REDOC_VERSION}"></script>
</body>
</html>
"""
_PAGE_HEADERS = {
    "Content-Security-Policy": DOCS_CSP,
    "Cache-Control": "public, max-age=300",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# The page asks for the bundle with ?v=<version>, so a day of caching survives no upgrade.
_BUNDLE_HEADERS = {
    "Content-Type": "text/javascript; charset=utf-8",
    "Cache-Control": "public, max-age=86400",
    "X-Content-Type-Options": "nosniff",
}


# Documents already built in this process, by settings: (endpoints, document) pairs. Building
# one takes a quarter of a second; a process that builds several apps of the same settings and
# routes (the test suite builds one per test) builds it once. Endpoints are compared by value.
_PUBLISHED: dict[Settings, list[tuple[list[Endpoint], openapi.PublishedDocument]]] = {}


def _published(settings: Settings, described: list[Endpoint]) -> openapi.PublishedDocument:
    built = _PUBLISHED.setdefault(settings, [])
    for endpoints_of, published in built:
        if endpoints_of == described:
            return published
    body = orjson.dumps(openapi.document(settings, described))
    published = openapi.PublishedDocument(body, hashlib.sha256(body).hexdigest()[:32])
    if len(_PUBLISHED) > 8:  # bounded: another process's worth of settings is not kept
        _PUBLISHED.clear()
        built = _PUBLISHED.setdefault(settings, [])
    built.append((described, published))
    return published


async def publish_openapi(app: web.Application) -> None:
    """At start-up, once every route is registered: describe the routes that exist."""
    app[openapi_key] = _published(app[settings_key], openapi.app_endpoints(app.router))


_NOT_MODIFIED = Reply(304, "Not modified (`If-None-Match`).")


@endpoints.get(
    "/openapi.json", operation_id="openapi", summary="This OpenAPI document", tag=TAG,
    access=PUBLIC, raw=True, description="Names only the routes this server has.",
    replies=(Reply(200, "OpenAPI 3.1.", file_schema={"type": "object"}), _NOT_MODIFIED))
async def openapi_json(request: web.Request) -> web.Response:
    published = request.app[openapi_key]
    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    if any(tag.value == published.etag for tag in request.if_none_match or ()):
        response = web.Response(status=304, headers=headers)
    else:
        response = web.Response(body=published.body, content_type="application/json",
                                headers=headers)
    response.etag = published.etag
    return response


@endpoints.get(
    "/docs", operation_id="docs", summary="API reference page", tag=TAG, access=PUBLIC, raw=True,
    replies=(Reply(200, "Renders this document with Redoc.", media_type="text/html",
                   file_schema={"type": "string"}),))
async def docs(request: web.Request) -> web.Response:
    if request.get(SLASH_STRIPPED):
        # `/docs/`: the page's relative URLs (kept relative for a service behind a path prefix)
        # would resolve under `/docs/`; the page is where they resolve.
        raise web.HTTPPermanentRedirect("../docs")
    return web.Response(text=DOCS_HTML, content_type="text/html", headers=_PAGE_HEADERS)


@endpoints.get(
    REDOC_URL, operation_id="redocBundle", summary="Redoc bundle used by /docs", tag=TAG,
    access=PUBLIC, raw=True,
    replies=(Reply(200, "The vendored Redoc standalone bundle.", media_type="text/javascript",
                   file_schema={"type": "string"}), _NOT_MODIFIED))
async def redoc_bundle(request: web.Request) -> web.FileResponse:
    # FileResponse answers If-None-Match / If-Modified-Since / Range itself.
    return web.FileResponse(REDOC_BUNDLE, headers=_BUNDLE_HEADERS)
