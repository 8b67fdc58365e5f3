"""Token use cases: authorise against the caller's rules, render expressions, encrypt, write.

Plaintext lives only in this process: what leaves for Neo4j is ciphertext (data, mask), keyed
HMACs (fingerprint, search index values) and the non-sensitive fields.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from .. import problems
from ..auth.permissions import TOKEN_CREATE, TOKEN_DELETE, TOKEN_READ, TOKEN_UPDATE
from ..auth.principal import Principal
from ..auth.rules import REVEAL, TRANSFORMS
from ..db import UniquenessViolation
from ..expressions import DEFAULT_FINGERPRINT_EXPRESSION, ExpressionError, render
from ..pagination import Page
from ..repository.tokens import TokenRepository
from ..settings import Settings
from ..tokens import view
from ..tokens.fields import normalize_container, parse_expires_at, validate_token_id
from ..tokens.merge_patch import merge_patch
from ..tokens.types import TokenType, get_type
from . import expiry

NOT_FOUND = "No token with that id."
META_SEPARATOR = "\u001f"
NEEDS_REVEAL = ("Changing a token's mask, fingerprint expression or search indexes needs a rule "
                "that reveals the token to the application.")
MOVE_REVEALS = ("The application may not move a token into containers where it would read more "
                "of the token's data.")


@dataclass
class Draft:
    """A token's fields after validation, before encryption."""

    type: TokenType
    data: Any
    mask: Any
    containers: list[str]
    metadata: dict[str, str]
    search_indexes: list[str]
    fingerprint_expression: str
    deduplicate: bool
    expires_at: datetime | None
    errors: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Listing:
    items: list[dict]
    next_after: str | None


def meta_kvs(metadata: dict[str, str]) -> list[str]:
    """The indexed form of metadata: lower-cased key and value, for exact case-insensitive match."""
    return [f"{k.lower()}{META_SEPARATOR}{v.lower()}" for k, v in metadata.items()]


class TokenService:
    def __init__(self, repo: TokenRepository, settings: Settings):
        self.repo = repo
        self.settings = settings

    # -- validation ---------------------------------------------------------------------------

    def _draft(self, body: dict, *, token_type: TokenType | None = None) -> Draft:
        errors: dict[str, list[str]] = {}
        if token_type is None:
            token_type = get_type(body["type"])
            if token_type is None:
                raise problems.invalid("type", "is not a known token type")
        data = body["data"]
        if len(orjson.dumps(data)) > self.settings.max_data_bytes:
            raise problems.PayloadTooLarge(
                f"data must be at most {self.settings.max_data_bytes} bytes as JSON.")
        errors.update(token_type.validate(data))
        containers = body.get("containers")
        if containers is None:
            containers = list(token_type.default_containers)
        if not containers:
            errors["containers"] = ["must hold at least one container"]
        elif len(containers) > self.settings.max_containers:
            errors["containers"] = [f"must hold at most {self.settings.max_containers} paths"]
        metadata = {k: v for k, v in (body.get("metadata") or {}).items() if v is not None}
        if len(metadata) > self.settings.max_metadata_entries:
            errors["metadata"] = [
                f"must hold at most {self.settings.max_metadata_entries} entries"]
        search_indexes = list(body.get("search_indexes") or ())
        if len(search_indexes) > self.settings.max_search_indexes:
            errors["search_indexes"] = [
                f"must hold at most {self.settings.max_search_indexes} expressions"]
        expires_at = None
        if body.get("expires_at") is not None:
            try:
                expires_at = parse_expires_at(body["expires_at"], now=datetime.now(UTC))
            except ValueError as exc:
                errors["expires_at"] = [str(exc)]
        draft = Draft(
            type=token_type, data=data, mask=body.get("mask"),
            containers=sorted({normalize_container(c) for c in containers}),
            metadata=metadata, search_indexes=search_indexes,
            fingerprint_expression=body.get("fingerprint_expression")
            or token_type.default_fingerprint_expression or DEFAULT_FINGERPRINT_EXPRESSION,
            deduplicate=bool(body.get("deduplicate_token")), expires_at=expires_at,
            errors=errors)
        if errors:
            raise problems.BadRequest("The token is invalid.", errors=errors)
        return draft

    def _render(self, draft: Draft, principal: Principal) -> tuple[str, list[str]]:
        """Fingerprint and search index values, keyed with the tenant's HMAC key."""
        try:
            rendered = render(draft.fingerprint_expression, data=draft.data,
                              metadata=draft.metadata, allow_empty=False)
        except ExpressionError as exc:
            raise problems.invalid("fingerprint_expression", str(exc)) from None
        values = []
        for i, expression in enumerate(draft.search_indexes):
            try:
                value = render(expression, data=draft.data, allow_empty=False)
            except ExpressionError as exc:
                raise problems.invalid(f"search_indexes.{i}", str(exc)) from None
            values.append(principal.keys.index_value(expression, value))
        return principal.keys.fingerprint(rendered), values

    def _token_id(self, body: dict, draft: Draft) -> str:
        raw = body.get("id")
        if raw is None:
            return str(uuid.uuid4())
        if "{{" in raw or "{%" in raw:
            try:
                raw = render(raw, data=draft.data, allow_empty=False)
            except ExpressionError as exc:
                raise problems.invalid("id", str(exc)) from None
        try:
            return validate_token_id(raw)
        except ValueError as exc:
            raise problems.invalid("id", str(exc)) from None

    def _props(self, principal: Principal, token_id: str, draft: Draft) -> dict[str, Any]:
        fingerprint, index_values = self._render(draft, principal)
        keys = principal.keys
        return {
            "type": draft.type.name,
            "data_ct": keys.encrypt_json(draft.data, token_id=token_id, field="data"),
            "mask_ct": None if draft.mask is None
            else keys.encrypt_json(draft.mask, token_id=token_id, field="mask"),
            "fingerprint": fingerprint,
            "fingerprint_expression": draft.fingerprint_expression,
            "containers": draft.containers,
            "metadata": orjson.dumps(draft.metadata).decode(),
            "search_indexes": draft.search_indexes,
            "search_index_values": index_values,
            "deduplicate_token": draft.deduplicate,
        }

    # -- use cases ----------------------------------------------------------------------------

    async def create(self, principal: Principal, body: dict, *,
                     parent_id: str | None = None) -> tuple[dict, bool]:
        """The response body and whether it is an existing token (dedup)."""
        draft = self._draft(body)
        if not principal.decide(draft.containers, TOKEN_CREATE).allowed:
            raise problems.Forbidden(
                "The application may not create tokens in these containers.")
        token_id = self._token_id(body, draft)
        props = self._props(principal, token_id, draft)
        props["created_by"] = principal.application_id
        try:
            result = await self.repo.create(
                tenant_id=principal.tenant_id, id=token_id, props=props,
                expires_at=draft.expires_at, meta_kvs=meta_kvs(draft.metadata),
                dedup=draft.deduplicate, parent_id=parent_id,
                parent_prefixes=principal.prefixes(TOKEN_READ) if parent_id else None,
                expired=(expiry.ACTOR, expiry.REASON))
        except UniquenessViolation:
            raise problems.Conflict("A token with that id exists.") from None
        if result is None:
            raise problems.NotFound(NOT_FOUND)
        node, deduplicated = result
        if deduplicated:
            return self._dedup_view(principal, node), True
        transform = principal.decide(draft.containers, TOKEN_READ).transform
        return view.present(node, transform, principal.keys, data=draft.data, mask=draft.mask,
                            plaintext_known=True), False

    def _dedup_view(self, principal: Principal, node: dict) -> dict:
        decision = principal.decide(node["containers"], TOKEN_READ)
        if not decision.allowed:
            body = view.summary(node)
        else:
            body = view.present(node, decision.transform, principal.keys)
        body["_extras"] = {"deduplicated": True}
        return body

    async def get(self, principal: Principal, token_id: str) -> dict:
        node = await self.repo.get(tenant_id=principal.tenant_id, id=token_id,
                                   prefixes=principal.prefixes(TOKEN_READ))
        if node is None:
            raise problems.NotFound(NOT_FOUND)
        return self.present(principal, node)

    def present(self, principal: Principal, node: dict) -> dict:
        decision = principal.decide(node["containers"], TOKEN_READ)
        return view.present(node, decision.transform, principal.keys)

    async def list(self, principal: Principal, page: Page, *, ids: list[str],
                   types: list[str], metadata: dict[str, str]) -> Listing:
        kvs = meta_kvs(metadata)
        # A value given twice filters once: the id and type statements seek once per value.
        ids, types = list(dict.fromkeys(ids)), list(dict.fromkeys(types))
        if ids:
            statement = "tokens/list_by_ids"
        elif kvs:
            statement = "tokens/list_by_metadata"
        elif types:
            statement = "tokens/list_by_type"
        else:
            statement = "tokens/list"
        after = page.after or ""
        nodes = await self.repo.list(
            statement, tenant_id=principal.tenant_id, prefixes=principal.prefixes(TOKEN_READ),
            after=after, limit=page.size + 1, ids=ids or None, types=types or None,
            meta_kvs=kvs)
        return self.listing(principal, nodes, page)

    def listing(self, principal: Principal, nodes: list[dict], page: Page) -> Listing:
        """A page from up to `page.size + 1` nodes in id order: the extra one says more exist."""
        shown = nodes[:page.size]
        more = len(nodes) > page.size
        return Listing([self.present(principal, n) for n in shown],
                       shown[-1]["id"] if more else None)

    async def delete(self, principal: Principal, token_id: str) -> None:
        if not await self.repo.delete(tenant_id=principal.tenant_id, id=token_id,
                                      prefixes=principal.prefixes(TOKEN_DELETE),
                                      actor=principal.application_id):
            raise problems.NotFound(NOT_FOUND)

    async def update(self, principal: Principal, token_id: str, patch: dict) -> dict:
        async def work(tx):
            node = await self.repo.lock_for_update(
                tx, tenant_id=principal.tenant_id, id=token_id,
                prefixes=principal.prefixes(TOKEN_UPDATE))
            if node is None:
                raise problems.NotFound(NOT_FOUND)
            return await self._apply_update(tx, principal, node, patch)

        return await self.repo.db.write_tx(work)

    @staticmethod
    def _check_no_new_view(principal: Principal, node: dict, current: dict, draft: Draft) -> None:
        """An update may not show the caller more of the data than its read rule does.

        Plaintext always takes a reveal rule: without one, a mask of `{{ data }}` would show the
        caller the data through its mask rule, and a fingerprint or search index over one digit,
        compared with keyed HMACs of guesses, would spell it out. Moving a token to containers
        where the caller's read transform is stronger would reveal it as plainly.
        """
        shown = principal.decide(node["containers"], TOKEN_READ).transform
        if shown != REVEAL and (
                draft.mask != current["mask"]
                or draft.fingerprint_expression != current["fingerprint_expression"]
                or draft.search_indexes != current["search_indexes"]):
            raise problems.Forbidden(NEEDS_REVEAL)
        moved = principal.decide(draft.containers, TOKEN_READ).transform
        if TRANSFORMS.index(moved) > TRANSFORMS.index(shown):
            raise problems.Forbidden(MOVE_REVEALS)

    async def _apply_update(self, tx, principal: Principal, node: dict, patch: dict) -> dict:
        keys = principal.keys
        current = {
            "data": view.decrypt_field(keys, node, "data"),
            "mask": view.decrypt_field(keys, node, "mask"),
            "metadata": orjson.loads(node["metadata"]) if node.get("metadata") else {},
            "containers": list(node["containers"]),
            "search_indexes": list(node.get("search_indexes") or ()),
            "fingerprint_expression": node.get("fingerprint_expression"),
            "deduplicate_token": node.get("deduplicate_token"),
            "expires_at": None,
        }
        merged = dict(current)
        for name in ("data", "mask", "metadata"):
            if name in patch:
                merged[name] = merge_patch(current[name], patch[name])
        for name in ("containers", "search_indexes", "fingerprint_expression",
                     "deduplicate_token", "expires_at"):
            if name in patch:
                merged[name] = patch[name]
        if merged["data"] is None:
            raise problems.invalid("data", "may not be removed")
        draft = self._draft(merged, token_type=get_type(node["type"]))
        if "expires_at" not in patch and node.get("expires_at") is not None:
            draft.expires_at = node["expires_at"].to_native()
        if not principal.decide(draft.containers, TOKEN_UPDATE).allowed:
            # Moving a token into containers the caller may not update is refused.
            raise problems.Forbidden("The application may not move tokens into these containers.")
        self._check_no_new_view(principal, node, current, draft)
        props = self._props(principal, node["id"], draft)
        props["modified_by"] = principal.application_id
        if draft.deduplicate:
            original = await self.repo.find_duplicate(
                tx, tenant_id=principal.tenant_id, id=node["id"], type=node["type"],
                fingerprint=props["fingerprint"])
            if original is not None:
                await self.repo.merge_into(tx, tenant_id=principal.tenant_id, id=node["id"],
                                           into=original["id"], actor=principal.application_id)
                decision = principal.decide(original["containers"], TOKEN_READ)
                body = view.present(original, decision.transform, keys)
                if not decision.allowed:
                    body = view.redact_for_duplicate(body)
                body["_extras"] = {"deduplicated": True}
                return body
        updated = await self.repo.update(
            tx, tenant_id=principal.tenant_id, id=node["id"], props=props,
            expires_at=draft.expires_at, meta_kvs=meta_kvs(draft.metadata))
        transform = principal.decide(draft.containers, TOKEN_READ).transform
        return view.present(updated, transform, keys, data=draft.data, mask=draft.mask,
                            plaintext_known=True)
