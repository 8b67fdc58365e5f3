"""Webhook management API (services/webhooks.py): the secret is in a response body only when a
webhook is created and when its secret is rotated, and in a replay of either under its
`Idempotency-Key` (the kept answer is encrypted under the tenant's key, as the secret itself
is stored: api/idempotency.py)."""

from __future__ import annotations

from aiohttp import web
from marshmallow import fields

from ..auth.permissions import WEBHOOK_CREATE, WEBHOOK_DELETE, WEBHOOK_READ, WEBHOOK_UPDATE
from ..services.webhooks import WebhookService
from ..tokens.schemas import UUID
from ..webhooks.schemas import (
    AttemptSchema,
    CreateWebhookSchema,
    NewWebhookSchema,
    RetriedDeliverySchema,
    SecretSchema,
    TestEventSchema,
    UpdateWebhookSchema,
    WebhookSchema,
)
from .endpoints import MERGE_PATCH_JSON, Body, Endpoints, Reply
from .paging import page_body, page_from_query
from .request_io import principal, read_object
from .schemas import PageQuery, page_of, path
from .typedefs import services_key, settings_key

endpoints = Endpoints()
TAG = "Webhooks"
WEBHOOK_PATH = path(id=fields.String(required=True, metadata={**UUID,
                                                               "description": "Webhook id."}))
CREATE = CreateWebhookSchema()
UPDATE = UpdateWebhookSchema()
_NOT_SHOWN = "Its secret is never shown again (rotate it to get a new one)."
_REPLAYED = ("A replay of this answer under the request's `Idempotency-Key` holds the same "
             "`secret`; no read shows it.")
DELIVERY_PATH = path(
    id=fields.String(required=True, metadata={**UUID, "description": "Webhook id."}),
    event_id=fields.String(required=True, metadata={
        **UUID, "description": "The event's id, as its attempts list it (`event_id`)."}))
_REACH = ("A webhook with a container outside the caller's `token:read` containers answers "
          "404, like an unknown id.")


WebhookPageSchema = page_of(WebhookSchema, "WebhookPageSchema")
AttemptPageSchema = page_of(AttemptSchema, "AttemptPageSchema")


def service(request: web.Request) -> WebhookService:
    return request.app[services_key].webhooks


@endpoints.post(
    "/webhooks", operation_id="createWebhook", summary="Create a webhook", tag=TAG,
    access=(WEBHOOK_CREATE,),
    description="Events of the caller's tenant are POSTed to `url`, signed (Standard "
                "Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`). "
                "`containers` must lie within the caller's `token:read` containers (403). An "
                "unknown event type, or a URL that is not allowed, is a 400.",
    body=Body(CreateWebhookSchema, "The webhook."),
    replies=(Reply(201, f"Created, with its signing secret. {_REPLAYED}",
                   NewWebhookSchema),),
    errors=(403,))
async def create_webhook(request: web.Request):
    body = CREATE.load(await read_object(request))
    return await service(request).create(principal(request), body)


@endpoints.get(
    "/webhooks", operation_id="listWebhooks", summary="List webhooks", tag=TAG,
    access=(WEBHOOK_READ,), query=(PageQuery,),
    description="Only webhooks whose containers all lie within the caller's `token:read` "
                "containers are listed.",
    replies=(Reply(200, "A page of the tenant's webhooks the caller may act on, in id order.",
                   WebhookPageSchema),))
async def list_webhooks(request: web.Request):
    page = page_from_query(request.query, request.app[settings_key], cursor_type=str)
    items, next_after = await service(request).page(principal(request), page)
    return page_body(items, page, next_after)


@endpoints.get(
    "/webhooks/{id}", operation_id="getWebhook", summary="Get a webhook", tag=TAG,
    access=(WEBHOOK_READ,), path_params=WEBHOOK_PATH, description=f"{_NOT_SHOWN} {_REACH}",
    replies=(Reply(200, "The webhook.", WebhookSchema),), errors=(404,))
async def get_webhook(request: web.Request):
    return await service(request).get(principal(request), request.match_info["id"])


@endpoints.patch(
    "/webhooks/{id}", operation_id="updateWebhook", summary="Update a webhook", tag=TAG,
    access=(WEBHOOK_UPDATE,), path_params=WEBHOOK_PATH,
    description="Only the fields given change. `status: disabled` pauses its deliveries; "
                "`enabled` resumes them (and re-enables a webhook the service disabled). "
                f"{_REACH} New `containers` must lie within them too (403).",
    body=Body(UpdateWebhookSchema, "A JSON merge patch (RFC 7386).", MERGE_PATCH_JSON),
    replies=(Reply(200, "The webhook.", WebhookSchema),), errors=(403, 404))
async def update_webhook(request: web.Request):
    patch = UPDATE.load(await read_object(request, MERGE_PATCH_JSON))
    return await service(request).update(principal(request), request.match_info["id"], patch)


@endpoints.delete(
    "/webhooks/{id}", operation_id="deleteWebhook", summary="Delete a webhook", tag=TAG,
    access=(WEBHOOK_DELETE,), path_params=WEBHOOK_PATH,
    description=f"Its pending deliveries are dropped. {_REACH}",
    replies=(Reply(204, "Deleted."),), errors=(404,))
async def delete_webhook(request: web.Request):
    await service(request).delete(principal(request), request.match_info["id"])


@endpoints.post(
    "/webhooks/{id}/secret", operation_id="rotateWebhookSecret",
    summary="Rotate a webhook's secret", tag=TAG, access=(WEBHOOK_UPDATE,),
    path_params=WEBHOOK_PATH,
    description="Deliveries carry a signature under each secret (two `v1,` signatures) until "
                f"the previous one expires, 24 hours from now. {_REACH}",
    replies=(Reply(201, f"The new secret. {_REPLAYED}",
                   SecretSchema),),
    errors=(404,))
async def rotate_secret(request: web.Request):
    return await service(request).rotate_secret(principal(request), request.match_info["id"])


@endpoints.get(
    "/webhooks/{id}/deliveries", operation_id="listWebhookDeliveries",
    summary="List a webhook's delivery attempts", tag=TAG, access=(WEBHOOK_READ,),
    path_params=WEBHOOK_PATH, query=(PageQuery,), description=_REACH,
    replies=(Reply(200, "Attempts, newest first.", AttemptPageSchema),), errors=(404,))
async def list_deliveries(request: web.Request):
    page = page_from_query(request.query, request.app[settings_key], cursor_type=list)
    items, position = await service(request).attempts(principal(request),
                                                      request.match_info["id"], page)
    return page_body(items, page, position)


@endpoints.post(
    "/webhooks/{id}/deliveries/{event_id}/retry", operation_id="retryWebhookDelivery",
    summary="Send an event to a webhook again", tag=TAG, access=(WEBHOOK_UPDATE,),
    path_params=DELIVERY_PATH,
    description="The event's delivery is due now: one failed for good gets one more attempt "
                "(its attempts are not reset), a delivered one (kept an hour) is sent again "
                "with the same `webhook-id`, one waiting for its next attempt has it now. "
                "Held while the webhook is disabled. An event being sent now is a 409; one "
                f"the webhook has no delivery of (or no longer keeps) a 404. {_REACH}",
    replies=(Reply(202, "Due; its attempt is listed under `/deliveries` when it ends.",
                   RetriedDeliverySchema),), errors=(404, 409))
async def retry_delivery(request: web.Request):
    return await service(request).retry_delivery(
        principal(request), request.match_info["id"], request.match_info["event_id"])


@endpoints.post(
    "/webhooks/{id}/test", operation_id="testWebhook", summary="Send a test event", tag=TAG,
    access=(WEBHOOK_UPDATE,), path_params=WEBHOOK_PATH,
    description="A `webhook.test` event, delivered like any other (held while the webhook is "
                f"disabled). {_REACH}",
    replies=(Reply(201, "Queued; its attempts are listed under `/deliveries`.",
                   TestEventSchema),), errors=(404,))
async def test_webhook(request: web.Request):
    return await service(request).send_test(principal(request), request.match_info["id"])
