"""Management API: applications, their API keys and access rules (services/applications.py).

A key is in a response body once, when it is created.
"""

from __future__ import annotations

from aiohttp import web

from ..applications.schemas import (
    ApiKeyListSchema,
    ApplicationBodySchema,
    ApplicationSchema,
    IssuedApiKeySchema,
    NewApplicationSchema,
    OwnApplicationSchema,
)
from ..applications.view import application_body, key_body
from ..auth.permissions import (
    APPLICATION_CREATE,
    APPLICATION_DELETE,
    APPLICATION_READ,
    APPLICATION_UPDATE,
    AUTHENTICATED,
)
from ..services.applications import ApplicationService, parse_draft
from .endpoints import Body, Endpoints, Reply
from .paging import page_body, page_from_query
from .request_io import principal, read_object
from .schemas import APPLICATION_PATH, KEY_PATH, ApplicationPageSchema, PageQuery
from .typedefs import services_key, settings_key

endpoints = Endpoints()
TAG = "Applications"
# `/applications/self` is its own route (GET only): the `{id}` routes never take "self", so a
# PUT or DELETE there is a 405 whose Allow header names GET alone.
APPLICATION_ID = r"/applications/{id:(?!self/?$)[^{}/]+}"
_NO_LOCK_OUT = ("No self lock-out: a tenant could otherwise lose its last management key; use "
                "another application's key.")


def service(request: web.Request) -> ApplicationService:
    return request.app[services_key].applications


@endpoints.post(
    "/applications", operation_id="createApplication", summary="Create an application",
    tag=TAG, access=(APPLICATION_CREATE,),
    body=Body(ApplicationSchema, "The application: permissions and access rules."),
    replies=(Reply(201, "Created, with its first API key (shown once: a replay under the "
                        "request's `Idempotency-Key` answers without `key`).",
                   NewApplicationSchema),), shown_once=("key",))
async def create_application(request: web.Request):
    """Create an application; the response carries its first key, the only time it is shown."""
    caller = principal(request)
    draft = parse_draft(await read_object(request))
    new = await service(request).create(caller.tenant_id, draft, grantor=caller)
    return {**application_body(new.application), "key": new.key}


@endpoints.get(
    "/applications", operation_id="listApplications", summary="List applications", tag=TAG,
    access=(APPLICATION_READ,), query=(PageQuery,),
    replies=(Reply(200, "A page of the tenant's applications.", ApplicationPageSchema),))
async def list_applications(request: web.Request):
    """The tenant's applications, oldest first, paginated by cursor."""
    page = page_from_query(request.query, request.app[settings_key])
    apps, position = await service(request).page(principal(request), page.size, page.after)
    return page_body([application_body(a) for a in apps], page,
                     list(position) if position else None)


@endpoints.get(
    "/applications/self", operation_id="getOwnApplication",
    summary="Get the calling application", tag=TAG, access=AUTHENTICATED,
    description="Any working API key may ask; `key_id` is the id of the key the request was "
                "made with (the one not to revoke with itself).",
    replies=(Reply(200, "The application the API key belongs to, and the key's id.",
                   OwnApplicationSchema),))
async def get_self(request: web.Request):
    caller = principal(request)
    app = await service(request).get(caller, caller.application_id)
    return {**application_body(app), "key_id": caller.key_id}


@endpoints.get(
    "/applications/{id}", pattern=APPLICATION_ID, operation_id="getApplication",
    summary="Get an application", tag=TAG, access=(APPLICATION_READ,),
    path_params=APPLICATION_PATH,
    replies=(Reply(200, "The application.", ApplicationBodySchema),), errors=(404,))
async def get_application(request: web.Request):
    return application_body(await service(request).get(principal(request),
                                                       request.match_info["id"]))


@endpoints.put(
    "/applications/{id}", pattern=APPLICATION_ID, operation_id="replaceApplication",
    summary="Replace an application's name, permissions and rules", tag=TAG,
    access=(APPLICATION_UPDATE,), path_params=APPLICATION_PATH,
    description="All of them: omitted lists become empty. 403 when the new definition grants "
                "more than the caller holds, or the application holds access the caller "
                f"lacks. {_NO_LOCK_OUT} An application cannot remove its own `application:*` "
                "permissions (400).",
    body=Body(ApplicationSchema, "The new definition."),
    replies=(Reply(200, "The application.", ApplicationBodySchema),), errors=(404,))
async def replace_application(request: web.Request):
    draft = parse_draft(await read_object(request))
    app = await service(request).replace(principal(request), request.match_info["id"], draft)
    return application_body(app)


@endpoints.delete(
    "/applications/{id}", pattern=APPLICATION_ID, operation_id="deleteApplication",
    summary="Delete an application and revoke its keys", tag=TAG,
    access=(APPLICATION_DELETE,), path_params=APPLICATION_PATH,
    description="Its keys are refused from now on. 403 when the application holds access the "
                f"caller lacks. {_NO_LOCK_OUT} An application cannot delete itself (400).",
    replies=(Reply(204, "Deleted."),), errors=(400, 404))
async def delete_application(request: web.Request):
    await service(request).delete(principal(request), request.match_info["id"])


@endpoints.post(
    "/applications/{id}/keys", operation_id="createApiKey", summary="Issue an API key",
    tag=TAG, access=(APPLICATION_UPDATE,), path_params=APPLICATION_PATH,
    description="Rotation: issue, switch, revoke the old one. 403 when the application holds "
                "access the caller lacks.",
    replies=(Reply(201, "The key, shown this once (a replay under the request's "
                        "`Idempotency-Key` answers without `key`).", IssuedApiKeySchema),),
    errors=(404,), shown_once=("key",))
async def create_key(request: web.Request):
    info, key = await service(request).create_key(principal(request), request.match_info["id"])
    return {**key_body(info), "key": key}


@endpoints.get(
    "/applications/{id}/keys", operation_id="listApiKeys",
    summary="List an application's working API keys", tag=TAG, access=(APPLICATION_READ,),
    path_params=APPLICATION_PATH,
    replies=(Reply(200, "Key ids and dates; never the keys.", ApiKeyListSchema),),
    errors=(404,))
async def list_keys(request: web.Request):
    keys = await service(request).keys(principal(request), request.match_info["id"])
    return {"data": [key_body(k) for k in keys]}


@endpoints.delete(
    "/applications/{id}/keys/{key_id}", operation_id="revokeApiKey",
    summary="Revoke an API key", tag=TAG, access=(APPLICATION_UPDATE,), path_params=KEY_PATH,
    description="403 when the application holds access the caller lacks. "
                f"{_NO_LOCK_OUT} An application cannot revoke the key it is calling with (400): "
                "rotate by issuing a key, switching, then revoking the old one with the new.",
    replies=(Reply(204, "Revoked: the key stops working at once."),), errors=(400, 404))
async def revoke_key(request: web.Request):
    await service(request).revoke_key(principal(request), request.match_info["id"],
                                      request.match_info["key_id"])
