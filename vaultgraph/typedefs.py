"""Every application and request slot, as a typed key."""

from __future__ import annotations

from aiohttp import web

from .auth.authenticate import Authenticator
from .auth.principal import Principal
from .catalog import Catalog
from .crypto import KeyRing
from .db import Database
from .openapi import PublishedDocument
from .services.expiry import ExpirySweeper
from .services.graph import GraphService
from .services.tokens import TokenService
from .settings import Settings

settings_key = web.AppKey("settings", Settings)
catalog_key = web.AppKey("catalog", Catalog)
database_key = web.AppKey("database", Database)
keyring_key = web.AppKey("keyring", KeyRing)
authenticator_key = web.AppKey("authenticator", Authenticator)
token_service_key = web.AppKey("token_service", TokenService)
graph_service_key = web.AppKey("graph_service", GraphService)
expiry_sweeper_key = web.AppKey("expiry_sweeper", ExpirySweeper)
openapi_key = web.AppKey("openapi", PublishedDocument)

PRINCIPAL = web.RequestKey("principal", Principal)
TRACE_ID = web.RequestKey("trace_id", str)
