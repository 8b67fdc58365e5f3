"""Applications, their keys and access rules: the management use cases.

Both the HTTP API and the CLI come through here. No privilege escalation: an application grants
only what it holds itself, and manages (replaces, deletes, issues or revokes keys for) only
applications whose access it holds itself. The CLI is the operator and passes no grantor.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validate

from .. import problems
from ..auth import apikeys
from ..auth.permissions import ALL_PERMISSIONS, MANAGEMENT_PERMISSIONS, TOKEN_PERMISSIONS
from ..auth.principal import Principal
from ..auth.rules import TRANSFORMS, Rule, effective_rules
from ..repository.applications import (
    ApiKeyInfo,
    Application,
    ApplicationDraft,
    ApplicationRepository,
)
from ..tokens.fields import normalize_container

MAX_RULES = 50
MAX_NAME = 200
MAX_DESCRIPTION = 200
MAX_PRIORITY = 2**31 - 1
# redact < mask < reveal: how much of a token's data a transform shows.
RANK = {transform: rank for rank, transform in enumerate(TRANSFORMS)}

NO_SUCH_APPLICATION = "No application with this id."
NO_SUCH_KEY = "No key with this id for this application."
CANNOT_MANAGE = ("The calling application cannot manage an application that holds access it "
                 "does not hold itself.")


# ---- input ---------------------------------------------------------------------------------

class _Container(fields.String):
    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return normalize_container(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class _Priority(fields.Integer):
    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class RuleSchema(Schema):
    class Meta:
        unknown = RAISE

    description = fields.String(load_default="", validate=validate.Length(max=MAX_DESCRIPTION))
    priority = _Priority(load_default=0, strict=True,
                         validate=validate.Range(min=0, max=MAX_PRIORITY))
    container = _Container(required=True)
    transform = fields.String(required=True, validate=validate.OneOf(TRANSFORMS))
    permissions = fields.List(fields.String(validate=validate.OneOf(TOKEN_PERMISSIONS)),
                              required=True, validate=validate.Length(min=1))

    @post_load
    def _rule(self, data, **_) -> Rule:
        return Rule(container=data["container"], transform=data["transform"],
                    permissions=frozenset(data["permissions"]), priority=data["priority"],
                    description=data["description"])


class ApplicationSchema(Schema):
    class Meta:
        unknown = RAISE

    name = fields.String(required=True, validate=[
        validate.Length(min=1, max=MAX_NAME),
        validate.Regexp(r"\S", error="must not be blank")])
    permissions = fields.List(fields.String(validate=validate.OneOf(ALL_PERMISSIONS)),
                              load_default=list)
    rules = fields.List(fields.Nested(RuleSchema), load_default=list,
                        validate=validate.Length(max=MAX_RULES))

    @post_load
    def _draft(self, data, **_) -> ApplicationDraft:
        return ApplicationDraft(name=data["name"],
                                permissions=tuple(sorted(set(data["permissions"]))),
                                rules=tuple(data["rules"]))


_SCHEMA = ApplicationSchema()


def parse_draft(raw: object) -> ApplicationDraft:
    """The body of a create or a replace; marshmallow's ValidationError (a 400) otherwise."""
    return _SCHEMA.load(raw)


def parse_id(value: str, detail: str = NO_SUCH_APPLICATION) -> str:
    """Ids are UUIDs; anything else is as unknown as an id that does not exist."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise problems.NotFound(detail) from None


_POSITION_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9]{2}:[0-9]{2})"
                          r"(\[[A-Za-z0-9/_+-]+\])?")


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
        raise problems.invalid("start", "is not a cursor this service issued") from None
    return at, last_id


# ---- grants --------------------------------------------------------------------------------

def _rule_covered(own_rules: Sequence[Rule], rule: Rule, permission: str) -> bool:
    """Would the grantor see every token `rule` opens, at least as revealed, for `permission`?

    The grantor's rules are tried in priority order and the first matching one decides. The
    first of its rules on a prefix of `rule.container` matches every token `rule` can match,
    but any earlier rule granting the permission may decide first (a token can sit in several
    containers), so the weakest transform up to that rule is what the grantor is sure to get.
    """
    weakest = len(TRANSFORMS) - 1
    for own in own_rules:
        if permission not in own.permissions:
            continue
        weakest = min(weakest, RANK[own.transform])
        if rule.container.startswith(own.container):
            return weakest >= RANK[rule.transform]
    return False


def excess(grantor: Principal, permissions: Sequence[str], rules: Sequence[Rule]) -> str | None:
    """Why `grantor` may not hand out this access, or None when it holds all of it."""
    missing = sorted(set(permissions) - grantor.all_granted())
    if missing:
        return ("The calling application cannot grant permissions it does not hold: "
                + ", ".join(missing) + ".")
    for index, rule in enumerate(rules or effective_rules(permissions, ())):
        for permission in sorted(rule.permissions):
            if _rule_covered(grantor.effective, rule, permission):
                continue
            if rules:
                return (f"rules[{index}] would grant {permission} with {rule.transform} on a "
                        "container where the calling application's own rules do not.")
            return (f"Token permissions without rules grant {permission} with mask on '/', "
                    "which the calling application's own rules do not.")
    return None


def _check_grant(grantor: Principal | None, draft: ApplicationDraft) -> None:
    if grantor is None:
        return
    reason = excess(grantor, draft.permissions, draft.rules)
    if reason:
        raise problems.Forbidden(reason)


def _check_manage(grantor: Principal, target: Application | None) -> Application:
    if target is None:
        raise problems.NotFound(NO_SUCH_APPLICATION)
    if excess(grantor, target.permissions, target.rules):
        raise problems.Forbidden(CANNOT_MANAGE)
    return target


# ---- use cases -----------------------------------------------------------------------------

async def create_application(repo: ApplicationRepository, tenant_id: str,
                             draft: ApplicationDraft, *,
                             grantor: Principal | None) -> tuple[Application, str]:
    """The new application and its first key (returned once, stored only as a digest)."""
    _check_grant(grantor, draft)
    key = apikeys.generate()
    created = await repo.create(
        tenant_id, str(uuid.uuid4()), draft,
        created_by=grantor.application_id if grantor else None,
        key_id=str(uuid.uuid4()), key_hash=apikeys.digest(key))
    if created is None:
        raise problems.NotFound("No tenant with this id.")
    return created, key


async def get_application(repo: ApplicationRepository, caller: Principal,
                          application_id: str) -> Application:
    found = await repo.get(caller.tenant_id, parse_id(application_id))
    if found is None:
        raise problems.NotFound(NO_SUCH_APPLICATION)
    return found


async def list_applications(repo: ApplicationRepository, caller: Principal, size: int,
                            cursor: object | None
                            ) -> tuple[list[Application], tuple[str, str] | None]:
    """A page in (created_at, id) order, and the position to continue from (None at the end)."""
    after = parse_position(cursor) if cursor is not None else None
    rows = await repo.page(caller.tenant_id, after, size + 1)
    page = rows[:size]
    return [app for app, _ in page], (page[-1][1] if len(rows) > size else None)


async def replace_application(repo: ApplicationRepository, caller: Principal,
                              application_id: str, draft: ApplicationDraft) -> Application:
    application_id = parse_id(application_id)
    _check_grant(caller, draft)
    dropped = (caller.permissions & set(MANAGEMENT_PERMISSIONS)) - set(draft.permissions)
    if application_id == caller.application_id and dropped:
        # Like self-deletion: the tenant's only management application could lock it out.
        raise problems.BadRequest("An application cannot remove its own management permissions; "
                                  "use another application's key.")

    async def work(tx):
        _check_manage(caller, await repo.lock(tx, caller.tenant_id, application_id))
        return await repo.update(tx, caller.tenant_id, application_id, draft,
                                 modified_by=caller.application_id)

    return await repo.db.write_tx(work)


async def delete_application(repo: ApplicationRepository, caller: Principal,
                             application_id: str) -> None:
    application_id = parse_id(application_id)
    if application_id == caller.application_id:
        # A tenant could otherwise lock itself out by deleting its only management application.
        raise problems.BadRequest("An application cannot delete itself; "
                                  "use another application's key.")

    async def work(tx):
        _check_manage(caller, await repo.lock(tx, caller.tenant_id, application_id))
        await repo.delete(tx, caller.tenant_id, application_id,
                          deleted_by=caller.application_id)

    await repo.db.write_tx(work)


async def create_key(repo: ApplicationRepository, caller: Principal,
                     application_id: str) -> tuple[ApiKeyInfo, str]:
    application_id = parse_id(application_id)
    key = apikeys.generate()
    key_id, key_hash = str(uuid.uuid4()), apikeys.digest(key)

    async def work(tx):
        _check_manage(caller, await repo.lock(tx, caller.tenant_id, application_id))
        return await repo.create_key(tx, caller.tenant_id, application_id,
                                     key_id=key_id, key_hash=key_hash)

    return await repo.db.write_tx(work), key


async def list_keys(repo: ApplicationRepository, caller: Principal,
                    application_id: str) -> list[ApiKeyInfo]:
    keys = await repo.keys(caller.tenant_id, parse_id(application_id))
    if keys is None:
        raise problems.NotFound(NO_SUCH_APPLICATION)
    return keys


async def revoke_key(repo: ApplicationRepository, caller: Principal, application_id: str,
                     key_id: str) -> None:
    application_id = parse_id(application_id)
    key_id = parse_id(key_id, NO_SUCH_KEY)
    if key_id == caller.key_id:
        # Rotation never needs it (issue, switch, then revoke the old key with the new one), and
        # it could leave a tenant without a working management key.
        raise problems.BadRequest("An application cannot revoke the key it is calling with; "
                                  "use another key.")

    async def work(tx):
        _check_manage(caller, await repo.lock(tx, caller.tenant_id, application_id))
        if not await repo.revoke_key(tx, caller.tenant_id, application_id, key_id,
                                     revoked_by=caller.application_id):
            raise problems.NotFound(NO_SUCH_KEY)

    await repo.db.write_tx(work)
