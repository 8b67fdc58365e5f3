"""Management API: applications, their API keys and access rules.

A key is in a response body once, when it is created; after any change that narrows or removes
access (replace, delete, key revocation) this process's authentication cache is cleared, so the
change holds at once here and within `auth_cache_ttl` on every other replica.
"""

from __future__ import annotations

from aiohttp import web

from ..auth.permissions import (
    APPLICATION_CREATE,
    APPLICATION_DELETE,
    APPLICATION_READ,
    APPLICATION_UPDATE,
    authenticated,
    requires,
)
from ..http import json_response, principal, read_json
from ..pagination import page_body, page_from_query
from ..repository.applications import ApiKeyInfo, Application, ApplicationRepository
from ..services import applications as service
from ..tokens.fields import format_datetime
from ..typedefs import authenticator_key, database_key, settings_key

routes = web.RouteTableDef()


def application_body(app: Application) -> dict:
    out = {
        "id": app.id,
        "tenant_id": app.tenant_id,
        "name": app.name,
        "permissions": list(app.permissions),
        "rules": [rule.to_dict() for rule in app.rules],
        "created_at": format_datetime(app.created_at),
        "created_by": app.created_by,
    }
    if app.modified_at is not None:
        out["modified_at"] = format_datetime(app.modified_at)
    return out


def key_body(key: ApiKeyInfo) -> dict:
    return {"id": key.id, "application_id": key.application_id,
            "created_at": format_datetime(key.created_at)}


def _repo(request: web.Request) -> ApplicationRepository:
    return ApplicationRepository(request.app[database_key])


def _access_changed(request: web.Request) -> None:
    request.app[authenticator_key].invalidate()


@routes.post("/applications")
@requires(APPLICATION_CREATE)
async def create_application(request: web.Request) -> web.Response:
    """Create an application; the response carries its first key, the only time it is shown."""
    caller = principal(request)
    draft = service.parse_draft(await read_json(request))
    app, key = await service.create_application(_repo(request), caller.tenant_id, draft,
                                                grantor=caller)
    return json_response({**application_body(app), "key": key}, status=201)


@routes.get("/applications")
@requires(APPLICATION_READ)
async def list_applications(request: web.Request) -> web.Response:
    """The tenant's applications, oldest first, paginated by cursor."""
    page = page_from_query(request.query, request.app[settings_key])
    apps, position = await service.list_applications(_repo(request), principal(request),
                                                     page.size, page.after)
    return json_response(page_body([application_body(a) for a in apps], page,
                                   list(position) if position else None))


@routes.get("/applications/self")
@authenticated
async def get_self(request: web.Request) -> web.Response:
    """The calling application and the id of the key it called with; any valid key may ask."""
    caller = principal(request)
    app = await service.get_application(_repo(request), caller, caller.application_id)
    return json_response({**application_body(app), "key_id": caller.key_id})


@routes.get("/applications/{id}")
@requires(APPLICATION_READ)
async def get_application(request: web.Request) -> web.Response:
    app = await service.get_application(_repo(request), principal(request),
                                        request.match_info["id"])
    return json_response(application_body(app))


@routes.put("/applications/{id}")
@requires(APPLICATION_UPDATE)
async def replace_application(request: web.Request) -> web.Response:
    """Replace name, permissions and rules (all of them: omitted lists become empty)."""
    draft = service.parse_draft(await read_json(request))
    app = await service.replace_application(_repo(request), principal(request),
                                            request.match_info["id"], draft)
    _access_changed(request)
    return json_response(application_body(app))


@routes.delete("/applications/{id}")
@requires(APPLICATION_DELETE)
async def delete_application(request: web.Request) -> web.Response:
    """Delete an application; its keys are refused from now on."""
    await service.delete_application(_repo(request), principal(request),
                                     request.match_info["id"])
    _access_changed(request)
    return web.Response(status=204)


@routes.post("/applications/{id}/keys")
@requires(APPLICATION_UPDATE)
async def create_key(request: web.Request) -> web.Response:
    """Issue another key (rotation: issue, switch, revoke the old one)."""
    info, key = await service.create_key(_repo(request), principal(request),
                                         request.match_info["id"])
    return json_response({**key_body(info), "key": key}, status=201)


@routes.get("/applications/{id}/keys")
@requires(APPLICATION_READ)
async def list_keys(request: web.Request) -> web.Response:
    """The application's working keys: ids and dates, never a key or its digest."""
    keys = await service.list_keys(_repo(request), principal(request), request.match_info["id"])
    return json_response({"data": [key_body(k) for k in keys]})


@routes.delete("/applications/{id}/keys/{key_id}")
@requires(APPLICATION_UPDATE)
async def revoke_key(request: web.Request) -> web.Response:
    await service.revoke_key(_repo(request), principal(request), request.match_info["id"],
                             request.match_info["key_id"])
    _access_changed(request)
    return web.Response(status=204)
