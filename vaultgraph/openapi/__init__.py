"""The OpenAPI 3.1 description of the API, and the part of it a running server publishes.

`full_document` describes every route the service has or is about to have; `published` keeps
only the operations whose route is registered, so `/openapi.json` never names a route that does
not exist. Tests check that every registered route is described, and that each operation's
`x-permission` is what its handler declares.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from aiohttp import web

from ..settings import Settings
from .components import components
from .paths import paths


@dataclass(frozen=True)
class PublishedDocument:
    """The served document, serialised once at start-up, with its ETag."""

    body: bytes
    etag: str

OPENAPI_VERSION = "3.1.0"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Registered beside every GET by aiohttp (HEAD) or answered generically: never described.
UNDESCRIBED_METHODS = ("head", "options")

Operation = tuple[str, str]  # (lower-case method, path template)

DESCRIPTION = """\
A token vault whose tokens are nodes in Neo4j.

Every operation except the public ones takes an application's API key in the `SVC-API-KEY`
header; `x-permission` on each operation names the permissions it needs. Errors are
`application/problem+json`. Every response carries `SVC-TRACE-ID` (echoed when the request sends
a well-formed one).

Lists are paged by cursor: `size` (items per page) and `start` (the `pagination.next` of the
previous page, opaque).
"""


def full_document(settings: Settings) -> dict:
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "vaultgraph", "version": _package_version(),
                 "description": DESCRIPTION,
                 "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"}},
        "servers": [{"url": "/", "description": "The server this document came from."}],
        "tags": [
            {"name": "Tokens", "description": "Create, read, update and delete tokens."},
            {"name": "Associations", "description": "Parent → child links between tokens."},
            {"name": "Applications", "description": "Applications, their access rules and "
                                                    "their API keys."},
            {"name": "Operations", "description": "Health, readiness and this documentation."},
        ],
        "security": [{"apiKey": []}],
        "paths": paths(),
        "components": components(settings),
    }


def registered_operations(router: web.UrlDispatcher) -> set[Operation]:
    out = set()
    for route in router.routes():
        method = route.method.lower()
        if method in UNDESCRIBED_METHODS or route.resource is None:
            continue
        out.add((method, route.resource.canonical))
    return out


def described_operations(document: dict) -> set[Operation]:
    return {(method, path) for path, item in document["paths"].items()
            for method in item if method in METHODS}


def published(document: dict, registered: set[Operation]) -> dict:
    """The document with only the registered operations (and the tags they use)."""
    out = copy.deepcopy(document)
    kept_paths = {}
    for path, item in out["paths"].items():
        kept = {key: value for key, value in item.items()
                if key not in METHODS or (key, path) in registered}
        if any(key in METHODS for key in kept):
            kept_paths[path] = kept
    out["paths"] = kept_paths
    used_tags = {tag for item in kept_paths.values() for key, op in item.items()
                 if key in METHODS for tag in op.get("tags", ())}
    out["tags"] = [tag for tag in out["tags"] if tag["name"] in used_tags]
    return out


def operation_of(document: dict, operation: Operation) -> dict | None:
    method, path = operation
    return document["paths"].get(path, {}).get(method)


def _package_version() -> str:
    try:
        return version("vaultgraph")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0"
