"""Webhook management: create, read, change, delete, rotate secrets, list attempts, send tests,
send an event again.

A webhook belongs to its tenant: another tenant's reads as absent (404, one text). Its
containers must lie within the caller's `token:read` containers (403 on a create, or on a
patch's new containers): a webhook never carries news of tokens its creator could not read.
Likewise an application reads, lists, changes, tests, rotates the secret of, lists the
deliveries of or deletes only a webhook it could have created, every container of it within
its `token:read` containers: the statement itself finds no other (on the webhook as stored,
before a patch), so one outside them reads as absent like another tenant's (404, one text; left
out of a page) and a narrower application learns nothing of it. Its secret is shown in the
answer that made it (and in that answer's `Idempotency-Key` replay, kept encrypted under the
tenant's key), and stored encrypted under the tenant's key (bound to the webhook's id).
The URL is checked by the outbound address policy when it is written (an IP literal in a
refused range is a 400) and again, after resolving its host, on every delivery.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from ..auth.permissions import TOKEN_READ
from ..auth.principal import Principal
from ..errors import Conflict, Forbidden, NotFound, invalid
from ..pagination import Page
from ..repository.webhooks import WebhookRepository
from ..webhooks import new_secret

NO_SUCH_WEBHOOK = "No webhook with this id."
NO_SUCH_DELIVERY = ("The webhook has no delivery of this event (a delivered event is kept an "
                    "hour, a failed one as long as its attempts are listed).")
IN_FLIGHT = "The event is being sent to this webhook now; its attempt is listed when it ends."
OUTSIDE = ("The application may only subscribe to containers within those it may read "
           "(token:read).")
SECRET_FIELD = "webhook_secret"  # the secret's encryption is bound to this and the webhook id
ROTATION_OVERLAP = 24 * 3600.0  # seconds the previous secret keeps signing
_POSITION_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9]{2}:[0-9]{2})")


def parse_id(value: str) -> str:
    """Ids are UUIDs; anything else is as unknown as an id that does not exist."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise NotFound(NO_SUCH_WEBHOOK) from None


def readable(principal: Principal) -> list[str]:
    """The caller's `token:read` containers: the reach of the webhooks it may create or act on."""
    return principal.prefixes(TOKEN_READ)


def within(prefixes: list[str], containers: list[str]) -> bool:
    """Every one of `containers` lies under one of `prefixes`. The statements acting on a stored
    webhook say the same in Cypher (cypher/fragments/all_in_prefixes.cypher)."""
    return all(any(c.startswith(p) for p in prefixes) for c in containers)


def encrypt_secret(principal: Principal, webhook_id: str, secret: str) -> str:
    return principal.keys.encrypt(secret.encode(), token_id=webhook_id, field=SECRET_FIELD)


class WebhookService:
    def __init__(self, repo: WebhookRepository, check_url=lambda url: None):
        """`check_url(url)`: the outbound address policy's message for a URL it refuses, or
        None (vaultgraph.outbound)."""
        self._repo = repo
        self._check_url = check_url

    def _checked(self, principal: Principal, body: dict[str, Any]) -> None:
        if "url" in body:
            message = self._check_url(body["url"])
            if message is not None:
                raise invalid("url", message)
        if "containers" in body:
            if not within(readable(principal), body["containers"]):
                raise Forbidden(OUTSIDE)
            body["containers"] = sorted(set(body["containers"]))
        if "events" in body:
            body["events"] = list(dict.fromkeys(body["events"]))

    async def create(self, principal: Principal, body: dict[str, Any]) -> dict:
        """The new webhook, with its secret (the only time it is shown)."""
        self._checked(principal, body)
        webhook_id = str(uuid.uuid4())
        secret = new_secret()
        created = await self._repo.create(
            tenant_id=principal.tenant_id, id=webhook_id, url=body["url"],
            events=body["events"], containers=body["containers"],
            description=body.get("description"),
            secret_ct=encrypt_secret(principal, webhook_id, secret),
            actor=principal.application_id)
        if created is None:
            raise NotFound("No tenant with this id.")
        return {**created, "secret": secret}

    async def get(self, principal: Principal, webhook_id: str) -> dict:
        found = await self._repo.get(tenant_id=principal.tenant_id, id=parse_id(webhook_id),
                                     prefixes=readable(principal))
        if found is None:
            raise NotFound(NO_SUCH_WEBHOOK)
        return found

    async def page(self, principal: Principal, page: Page) -> tuple[list[dict], str | None]:
        rows = await self._repo.page(tenant_id=principal.tenant_id, after=page.after or "",
                                     limit=page.size + 1, prefixes=readable(principal))
        shown = rows[:page.size]
        return shown, (shown[-1]["id"] if len(rows) > page.size else None)

    async def update(self, principal: Principal, webhook_id: str,
                     patch: dict[str, Any]) -> dict:
        webhook_id = parse_id(webhook_id)
        changes = {k: v for k, v in patch.items() if k != "description" and v is not None}
        if "description" in patch:
            changes["description"] = patch["description"]
        for name in ("url", "events", "containers", "status"):
            if name in patch and patch[name] is None:
                raise invalid(name, "may not be removed")
        self._checked(principal, changes)  # the new containers; the statement checks the old
        updated = await self._repo.update(tenant_id=principal.tenant_id, id=webhook_id,
                                          prefixes=readable(principal), changes=changes,
                                          actor=principal.application_id)
        if updated is None:
            raise NotFound(NO_SUCH_WEBHOOK)
        return updated

    async def delete(self, principal: Principal, webhook_id: str) -> None:
        if not await self._repo.delete(tenant_id=principal.tenant_id, id=parse_id(webhook_id),
                                       prefixes=readable(principal)):
            raise NotFound(NO_SUCH_WEBHOOK)

    async def rotate_secret(self, principal: Principal, webhook_id: str) -> dict:
        webhook_id = parse_id(webhook_id)
        secret = new_secret()
        rotated = await self._repo.rotate_secret(
            tenant_id=principal.tenant_id, id=webhook_id, prefixes=readable(principal),
            secret_ct=encrypt_secret(principal, webhook_id, secret), overlap=ROTATION_OVERLAP,
            actor=principal.application_id)
        if rotated is None:
            raise NotFound(NO_SUCH_WEBHOOK)
        until = datetime.now(UTC) + timedelta(seconds=ROTATION_OVERLAP)
        return {"secret": secret,
                "previous_secret_expires_at": until.isoformat().replace("+00:00", "Z")}

    async def send_test(self, principal: Principal, webhook_id: str) -> dict:
        event_id = str(uuid.uuid4())
        if not await self._repo.send_test(tenant_id=principal.tenant_id,
                                          id=parse_id(webhook_id), prefixes=readable(principal),
                                          event_id=event_id, actor=principal.application_id):
            raise NotFound(NO_SUCH_WEBHOOK)
        return {"event_id": event_id}

    async def retry_delivery(self, principal: Principal, webhook_id: str,
                             event_id: str) -> dict:
        """Send an event to the webhook again now (held while the webhook is disabled): a
        delivery failed for good gets one more attempt, a delivered one is sent again, one
        waiting for its next attempt has it now. One a sender is sending is a 409."""
        try:
            event_id = str(uuid.UUID(event_id))
        except ValueError:
            raise NotFound(NO_SUCH_DELIVERY) from None
        row = await self._repo.retry_delivery(tenant_id=principal.tenant_id,
                                              id=parse_id(webhook_id),
                                              prefixes=readable(principal), event_id=event_id)
        if row is None:
            raise NotFound(NO_SUCH_WEBHOOK)
        if not row["found"]:
            raise NotFound(NO_SUCH_DELIVERY)
        if row["in_flight"]:
            raise Conflict(IN_FLIGHT)
        return {"event_id": event_id, "state": row["state"]}

    async def attempts(self, principal: Principal, webhook_id: str,
                       page: Page) -> tuple[list[dict], list[str] | None]:
        before = _position(page.after) if page.after is not None else None
        rows = await self._repo.attempts(tenant_id=principal.tenant_id,
                                         id=parse_id(webhook_id), prefixes=readable(principal),
                                         before=before, limit=page.size + 1)
        if rows is None:
            raise NotFound(NO_SUCH_WEBHOOK)
        shown = rows[:page.size]
        more = len(rows) > page.size
        return shown, ([shown[-1]["at"], shown[-1]["id"]] if more else None)


def _position(cursor: object) -> tuple[str, str]:
    try:
        at, last_id = cursor  # type: ignore[misc]
        if not (isinstance(at, str) and _POSITION_AT.fullmatch(at)):
            raise ValueError
        if str(uuid.UUID(last_id)) != last_id:
            raise ValueError
    except (TypeError, ValueError, AttributeError):
        raise invalid("start", "is not a cursor this service issued") from None
    return at, last_id
