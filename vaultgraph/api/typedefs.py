"""Every application and request slot, as a typed key (types named only for the checker, so
importing this module loads nothing heavy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from ..auth.principal import Principal
    from ..settings import Settings
    from ..wiring import Services
    from .openapi import PublishedDocument

settings_key: web.AppKey[Settings] = web.AppKey("settings")
services_key: web.AppKey[Services] = web.AppKey("services")
openapi_key: web.AppKey[PublishedDocument] = web.AppKey("openapi")

PRINCIPAL: web.RequestKey[Principal] = web.RequestKey("principal")
TRACE_ID: web.RequestKey[str] = web.RequestKey("trace_id")
# Set on a request served by the route without its trailing slash (api/middleware.py `observe`).
SLASH_STRIPPED: web.RequestKey[bool] = web.RequestKey("slash_stripped")

# What every answer names as its server (api/middleware.py `observe`, the metrics listener): no
# versions (aiohttp's default names its own and Python's, which tells a scanner what to try).
SERVER = "Server"
SERVER_NAME = "vaultgraph"
