"""Applications, their keys and access rules: the management use cases.

Both the HTTP API and the CLI come through here. No privilege escalation (auth/grants.py): an
application grants only what it holds itself, and manages (replaces, deletes, issues or revokes
keys for) only applications whose access it holds itself. The CLI is the operator and passes no
grantor.

After any change that narrows or removes access (replace, delete, key revocation) the
`on_access_changed` callback runs (the authenticator clears its cache), so the change holds at
once on this process and within `auth_cache_ttl` on every other replica.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from ..applications.model import ApiKeyInfo, Application, ApplicationDraft
from ..applications.schemas import ApplicationSchema
from ..auth import apikeys
from ..auth.grants import excess
from ..auth.permissions import ALL_PERMISSIONS, MANAGEMENT_PERMISSIONS, TOKEN_PERMISSIONS
from ..auth.principal import Principal
from ..auth.rules import REVEAL, Rule
from ..errors import Forbidden, Invalid, NotFound, invalid
from ..repository.applications import ApplicationRepository

NO_SUCH_APPLICATION = "No application with this id."
NO_SUCH_KEY = "No key with this id for this application."
CANNOT_MANAGE = ("The calling application cannot manage an application that holds access it "
                 "does not hold itself.")

_SCHEMA = ApplicationSchema()
_POSITION_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9]{2}:[0-9]{2})"
                          r"(\[[A-Za-z0-9/_+-]+\])?")


@dataclass(frozen=True, slots=True)
class NewApplication:
    """A new application, the id of its first key and the key (shown once, stored only as a
    digest)."""

    application: Application
    key_id: str
    key: str = field(repr=False)  # shown once: never in a repr (a traceback, a log)


def parse_draft(raw: object) -> ApplicationDraft:
    """The body of a create or a replace; marshmallow's ValidationError (a 400) otherwise."""
    return _SCHEMA.load(raw)


def parse_id(value: str, detail: str = NO_SUCH_APPLICATION) -> str:
    """Ids are UUIDs; anything else is as unknown as an id that does not exist."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise NotFound(detail) from None


def parse_position(cursor: object) -> tuple[str, str]:
    """A decoded `start` cursor: the (created_at, id) of the last application already seen."""
    try:
        at, last_id = cursor  # type: ignore[misc]
        if not (isinstance(at, str) and _POSITION_AT.fullmatch(at)):
            raise ValueError
        datetime.fromisoformat(at.split("[", 1)[0])
        if str(uuid.UUID(last_id)) != last_id:
            raise ValueError
    except (TypeError, ValueError, AttributeError):
        raise invalid("start", "is not a cursor this service issued") from None
    return at, last_id


def operator(tenant_id: str) -> Principal:
    """The command line's caller: the operator of the whole service, acting in one tenant. It
    holds every permission and reveals everywhere, so no grant check refuses it; it has no
    application or key of its own (`created_by`/`revoked_by` stay empty, as for the tenant's
    first application) and no tenant keys (management use cases never encrypt)."""
    return Principal(
        tenant_id=tenant_id, application_id=None, key_id="",  # type: ignore[arg-type]
        permissions=frozenset(ALL_PERMISSIONS),
        rules=(Rule(container="/", transform=REVEAL, permissions=frozenset(TOKEN_PERMISSIONS),
                    description="operator"),),
        keys=None)  # type: ignore[arg-type]


def _check_grant(grantor: Principal | None, draft: ApplicationDraft) -> None:
    if grantor is None:
        return
    reason = excess(grantor, draft.permissions, draft.rules)
    if reason:
        raise Forbidden(reason)


def _check_manage(grantor: Principal, target: Application | None) -> Application:
    if target is None:
        raise NotFound(NO_SUCH_APPLICATION)
    if excess(grantor, target.permissions, target.rules):
        raise Forbidden(CANNOT_MANAGE)
    return target


class ApplicationService:
    def __init__(self, repo: ApplicationRepository,
                 on_access_changed: Callable[[], None] = lambda: None):
        self._repo = repo
        self._access_changed = on_access_changed

    async def create(self, tenant_id: str, draft: ApplicationDraft, *,
                     grantor: Principal | None) -> NewApplication:
        """The new application with its first key and that key's id."""
        _check_grant(grantor, draft)
        key, key_id = apikeys.generate(), str(uuid.uuid4())
        created = await self._repo.create(
            tenant_id, str(uuid.uuid4()), draft,
            created_by=grantor.application_id if grantor else None,
            key_id=key_id, key_hash=apikeys.digest(key))
        if created is None:
            raise NotFound("No tenant with this id.")
        return NewApplication(created, key_id, key)

    async def get(self, caller: Principal, application_id: str) -> Application:
        found = await self._repo.get(caller.tenant_id, parse_id(application_id))
        if found is None:
            raise NotFound(NO_SUCH_APPLICATION)
        return found

    async def page(self, caller: Principal, size: int, cursor: object | None
                   ) -> tuple[list[Application], tuple[str, str] | None]:
        """A page in (created_at, id) order, and the position to continue from (None at the
        end)."""
        after = parse_position(cursor) if cursor is not None else None
        rows = await self._repo.page(caller.tenant_id, after, size + 1)
        if not rows and after is None and not await self._repo.tenant_exists(caller.tenant_id):
            # Only the operator names a tenant (an API caller's own tenant has its caller).
            raise NotFound("No tenant with this id.")
        page = rows[:size]
        return [app for app, _ in page], (page[-1][1] if len(rows) > size else None)

    async def replace(self, caller: Principal, application_id: str,
                      draft: ApplicationDraft) -> Application:
        application_id = parse_id(application_id)
        _check_grant(caller, draft)
        dropped = (caller.permissions & set(MANAGEMENT_PERMISSIONS)) - set(draft.permissions)
        if application_id == caller.application_id and dropped:
            # Like self-deletion: the tenant's only management application could lock it out.
            raise Invalid("An application cannot remove its own management permissions; "
                          "use another application's key.")

        async def work(uow):
            _check_manage(caller, await uow.lock(caller.tenant_id, application_id))
            return await uow.update(caller.tenant_id, application_id, draft,
                                    modified_by=caller.application_id)

        replaced = await self._repo.unit_of_work(work)
        self._access_changed()
        return replaced

    async def delete(self, caller: Principal, application_id: str) -> None:
        application_id = parse_id(application_id)
        if application_id == caller.application_id:
            # A tenant could otherwise lock itself out by deleting its only management
            # application.
            raise Invalid("An application cannot delete itself; use another application's key.")

        async def work(uow):
            _check_manage(caller, await uow.lock(caller.tenant_id, application_id))
            await uow.delete(caller.tenant_id, application_id, deleted_by=caller.application_id)

        await self._repo.unit_of_work(work)
        self._access_changed()

    async def create_key(self, caller: Principal,
                         application_id: str) -> tuple[ApiKeyInfo, str]:
        application_id = parse_id(application_id)
        key = apikeys.generate()
        key_id, key_hash = str(uuid.uuid4()), apikeys.digest(key)

        async def work(uow):
            _check_manage(caller, await uow.lock(caller.tenant_id, application_id))
            return await uow.create_key(caller.tenant_id, application_id,
                                        key_id=key_id, key_hash=key_hash)

        return await self._repo.unit_of_work(work), key

    async def keys(self, caller: Principal, application_id: str) -> list[ApiKeyInfo]:
        keys = await self._repo.keys(caller.tenant_id, parse_id(application_id))
        if keys is None:
            raise NotFound(NO_SUCH_APPLICATION)
        return keys

    async def revoke_key(self, caller: Principal, application_id: str, key_id: str) -> None:
        application_id = parse_id(application_id)
        key_id = parse_id(key_id, NO_SUCH_KEY)
        if key_id == caller.key_id:
            # Rotation never needs it (issue, switch, then revoke the old key with the new one),
            # and it could leave a tenant without a working management key.
            raise Invalid("An application cannot revoke the key it is calling with; "
                          "use another key.")

        async def work(uow):
            _check_manage(caller, await uow.lock(caller.tenant_id, application_id))
            if not await uow.revoke_key(caller.tenant_id, application_id, key_id,
                                        revoked_by=caller.application_id):
                raise NotFound(NO_SUCH_KEY)

        await self._repo.unit_of_work(work)
        self._access_changed()
