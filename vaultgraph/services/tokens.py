"""Token use cases: authorise against the caller's rules, render expressions, encrypt, write.

Plaintext lives only in this process: what leaves for Neo4j is ciphertext (data, mask), keyed
HMACs (fingerprint, search index values) and the non-sensitive fields.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from .. import metrics
from ..audit.context import expect, note_shown, note_tokens
from ..auth.permissions import TOKEN_CREATE, TOKEN_DELETE, TOKEN_READ, TOKEN_UPDATE
from ..auth.principal import Principal
from ..auth.rules import MASK
from ..auth.token_access import VIEW_FIELDS, match_transform, may_merge, update_refusal
from ..errors import Conflict, Forbidden, Invalid, NotFound, TooLarge, UniquenessViolation, invalid
from ..expressions import (
    DEFAULT_FINGERPRINT_EXPRESSION,
    ExpressionError,
    check_mask_bounds,
    render,
    renders_without_liquid,
)
from ..pagination import Page
from ..repository.tokens import (
    Contended,
    TokenFilter,
    TokenRepository,
    TokenUnitOfWork,
    UnlockedUpdate,
)
from ..search import BLIND_INDEX
from ..settings import Settings
from ..tokens import view
from ..tokens.fields import (
    has_control_character,
    normalize_container,
    parse_expires_at,
    validate_token_id,
)
from ..tokens.merge_patch import merge_patch
from ..tokens.stored import StoredToken
from ..tokens.types import TokenType, get_type
from . import expiry
from .rendering import Renderer

NOT_FOUND = "No token with that id."
META_SEPARATOR = "\u001f"


def renders_caller_expressions(body: dict) -> bool:
    """Whether preparing a loaded create request renders an expression its caller wrote that
    needs Liquid: an id expression, a fingerprint or search index expression, a mask (rendered
    on write against its bounds). The shapes rendered without Liquid (a look-up, or one of the
    vault's own filters over one: `renders_without_liquid`) are cheap and bounded, and render
    inline as the type's own expressions do (`TokenService.prepare`)."""
    raw_id = body.get("id")
    written = [body.get("fingerprint_expression"), body.get("mask"),
               *(body.get("search_indexes") or ())]
    if raw_id is not None and ("{{" in raw_id or "{%" in raw_id):
        written.append(raw_id)
    return _needs_liquid(written)


def _needs_liquid(written: list[Any]) -> bool:
    """Whether one of the caller's expressions (None: not given) needs Liquid."""
    return not all(w is None or renders_without_liquid(w) for w in written)


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

    def fingerprints_by_its_type(self) -> bool:
        """Whether its fingerprint expression is its type's own, not one a caller wrote."""
        return self.fingerprint_expression in (self.type.default_fingerprint_expression,
                                               DEFAULT_FINGERPRINT_EXPRESSION)

    def renders_caller_expressions(self) -> bool:
        """Whether storing it renders an expression a caller wrote that needs Liquid (its mask,
        checked against its bounds; its search indexes; a fingerprint expression not its
        type's own), as `renders_caller_expressions` of a create request."""
        written = [self.mask, *self.search_indexes]
        if not self.fingerprints_by_its_type():
            written.append(self.fingerprint_expression)
        return _needs_liquid(written)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A create request ready to write: its id, validated fields and stored properties
    (ciphertext and keyed digests)."""

    id: str
    draft: Draft
    props: dict[str, Any]
    digests: list[str]  # blind-index entries (HAS_INDEX) of its search index values


@dataclass(frozen=True)
class Listing:
    items: list[dict]
    next_after: str | None


# Not frozen: a page makes one for each token it shows, and a frozen dataclass's __init__
# costs five times as much (object.__setattr__ for each field). Nothing changes one once made.
@dataclass(slots=True)
class Shown:
    """A token to present under a transform; `data`/`mask` when the plaintext is in hand."""

    token: StoredToken
    transform: str
    data: Any = None
    mask: Any = None
    plaintext_known: bool = False
    extras: dict | None = None

    @property
    def renders_caller_mask(self) -> bool:
        """Whether presenting it renders a mask the caller wrote (not a type default)."""
        if self.transform != MASK:
            return False
        return self.mask is not None if self.plaintext_known else self.token.mask_ct is not None


@dataclass(frozen=True, slots=True)
class Summary:
    """The cut-down answer for a dedup match the caller cannot read."""

    token: StoredToken
    extras: dict


@functools.lru_cache(maxsize=1_024)
def stored_containers(paths: tuple[str, ...]) -> tuple[str, ...]:
    """Container paths as a token stores them: normalised, each once, sorted. Cached: a tenant's
    tokens share a few sets of containers (their type's default, a token's own on update)."""
    return tuple(sorted({normalize_container(path) for path in paths}))


def meta_kvs(metadata: dict[str, str]) -> list[str]:
    """The indexed form of metadata: lower-cased key and value, for exact case-insensitive match.

    Each entry once: keys that differ only by case with equal values (`Colour: Red`,
    `colour: red`) are one entry, so a filter finds the token once, not once per spelling."""
    return list(dict.fromkeys(f"{k.lower()}{META_SEPARATOR}{v.lower()}"
                              for k, v in metadata.items()))


class TokenService:
    def __init__(self, repo: TokenRepository, settings: Settings, renderer: Renderer):
        self.repo = repo
        self.settings = settings
        self.renderer = renderer

    # -- presentation -------------------------------------------------------------------------

    async def render(self, principal: Principal, items: list[Shown | Summary], *,
                     shows_data: bool = True) -> list[dict]:
        """Response bodies; caller-written masks render off the event loop (rendering.py).
        Without `shows_data`, bodies without data and mask (view.present)."""
        keys = principal.keys

        def work() -> list[dict]:
            out = []
            for item in items:
                if type(item) is Summary:
                    body = view.summary(item.token)
                else:
                    body = view.present(item.token, item.transform, keys,
                                        data=item.data, mask=item.mask,
                                        plaintext_known=item.plaintext_known,
                                        shows_data=shows_data)
                if item.extras is not None:
                    body["_extras"] = item.extras
                out.append(body)
            return out

        note_shown([item.token.id for item in items],
                   [item.transform if type(item) is Shown else "summary" for item in items])
        if shows_data and any(item.renders_caller_mask for item in items
                              if type(item) is Shown):
            return await self.renderer.run(work)
        return work()

    async def present_all(self, principal: Principal, nodes: list[StoredToken],
                          operation: str = TOKEN_READ) -> list[dict]:
        """Each node under the transform of the rule that grants `operation` on it."""
        # A page's tokens share a few sets of containers: each set is decided once.
        transforms: dict[tuple[str, ...], str] = {}
        items = []
        for node in nodes:
            transform = transforms.get(node.containers)
            if transform is None:
                transform = transforms[node.containers] = principal.decide(
                    node.containers, operation).transform
            items.append(Shown(node, transform))
        return await self.render(principal, items)

    # -- validation ---------------------------------------------------------------------------

    def _draft(self, body: dict, *, token_type: TokenType | None = None) -> Draft:
        errors: dict[str, list[str]] = {}
        if token_type is None:
            token_type = get_type(body["type"])
            if token_type is None:
                raise invalid("type", "is not a known token type")
        data = body["data"]
        if len(orjson.dumps(data)) > self.settings.max_data_bytes:
            raise TooLarge(
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
            # A list refused above (over the limit) is never normalised, so never cached.
            containers=([] if "containers" in errors
                        else list(stored_containers(tuple(containers)))),
            metadata=metadata, search_indexes=search_indexes,
            fingerprint_expression=body.get("fingerprint_expression")
            or token_type.default_fingerprint_expression or DEFAULT_FINGERPRINT_EXPRESSION,
            deduplicate=bool(body.get("deduplicate_token")), expires_at=expires_at,
            errors=errors)
        if errors:
            raise Invalid("The token is invalid.", errors=errors)
        return draft

    def _render(self, draft: Draft,
                principal: Principal) -> tuple[str, list[str], list[str]]:
        """Fingerprint, search index values and their blind-index digests (search/), each
        keyed with the tenant's HMAC key."""
        if draft.mask is not None:
            try:  # bounded on write too, not only when read (docs/security.md)
                check_mask_bounds(draft.mask, data=draft.data)
            except ExpressionError as exc:
                raise invalid("mask", str(exc)) from None
        try:
            rendered = render(draft.fingerprint_expression, data=draft.data,
                              metadata=draft.metadata)
        except ExpressionError as exc:
            raise invalid("fingerprint_expression", str(exc)) from None
        if not rendered.strip():
            if draft.fingerprints_by_its_type():  # the caller wrote no expression: its data
                raise invalid("data", "must not be empty: its fingerprint would be")
            raise invalid("fingerprint_expression", "expression rendered an empty value")
        values: list[str] = []
        digests: list[str] = []
        for i, expression in enumerate(draft.search_indexes):
            try:
                value = render(expression, data=draft.data)
            except ExpressionError as exc:
                raise invalid(f"search_indexes.{i}", str(exc)) from None
            if not value.strip():
                # Nothing to find the token by (an index over an optional field the data
                # lacks): no entry, rather than refusing the write.
                continue
            values.append(principal.keys.index_value(expression, value))
            digests.append(principal.keys.index_value(BLIND_INDEX, value))
        return principal.keys.fingerprint(rendered), values, list(dict.fromkeys(digests))

    def _token_id(self, body: dict, draft: Draft) -> str:
        raw = body.get("id")
        if raw is None:
            return str(uuid.uuid4())
        if "{{" in raw or "{%" in raw:
            try:
                raw = render(raw, data=draft.data, allow_empty=False)
            except ExpressionError as exc:
                raise invalid("id", str(exc)) from None
        try:
            return validate_token_id(raw)
        except ValueError as exc:
            raise invalid("id", str(exc)) from None

    def _props(self, principal: Principal, token_id: str,
               draft: Draft) -> tuple[dict[str, Any], list[str]]:
        """The node's properties, and the blind-index digests of its search index values."""
        fingerprint, index_values, digests = self._render(draft, principal)
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
        }, digests

    # -- use cases ----------------------------------------------------------------------------

    def prepare(self, principal: Principal, body: dict) -> Prepared:
        """A loaded create request, validated, authorised and encrypted, ready to write (the
        single create and POST /tokenize share it). Raises the item's domain error."""
        draft = self._draft(body)
        if not principal.allowed_on_each(draft.containers, TOKEN_CREATE):
            # Rights on one container never stand for another (docs/security.md).
            raise Forbidden(
                "The application may not create tokens in these containers.")
        token_id = self._token_id(body, draft)
        note_tokens((token_id,))  # named in the write's own audit event
        props, digests = self._props(principal, token_id, draft)
        props["created_by"] = principal.application_id
        return Prepared(token_id, draft, props, digests)

    def created_answer(self, principal: Principal, prepared: Prepared, token: StoredToken,
                       deduplicated: bool) -> Shown | Summary:
        """What the caller is shown of a create's result: the new token under its transform
        (plaintext in hand), or the dedup match as the caller may see it."""
        if deduplicated:
            return dedup_answer(principal, token)
        draft = prepared.draft
        transform = principal.decide(draft.containers, TOKEN_READ).transform
        return Shown(token, transform, data=draft.data, mask=draft.mask, plaintext_known=True)

    async def create(self, principal: Principal, body: dict, *, parent_id: str | None = None,
                     shows_data: bool = True) -> tuple[dict, bool]:
        """The response body and whether it is an existing token (dedup); without
        `shows_data`, a body without data and mask (render)."""
        # Caller-written expressions render off the event loop, under the request's one render
        # budget, as a tokenize's do.
        prepared = await self.renderer.run_where(
            renders_caller_expressions(body), functools.partial(self.prepare, principal, body))
        token_id, draft, props = prepared.id, prepared.draft, prepared.props
        if not draft.deduplicate:  # a create that may find its twin cannot say how it ends
            expect(201, principal.decide(draft.containers, TOKEN_READ).transform)
        try:
            result = await self.repo.create(
                tenant_id=principal.tenant_id, id=token_id, props=props,
                expires_at=draft.expires_at, meta_kvs=meta_kvs(draft.metadata),
                index_digests=prepared.digests, dedup=draft.deduplicate, parent_id=parent_id,
                parent_prefixes=principal.prefixes(TOKEN_READ) if parent_id else None,
                expired=(expiry.ACTOR, expiry.REASON))
        except UniquenessViolation:
            raise Conflict("A token with that id exists.") from None
        if result is None:
            raise NotFound(NOT_FOUND)
        [body] = await self.render(principal, [self.created_answer(
            principal, prepared, result.token, result.deduplicated)], shows_data=shows_data)
        return body, result.deduplicated

    async def get(self, principal: Principal, token_id: str) -> dict:
        node = await self.repo.get(tenant_id=principal.tenant_id, id=token_id,
                                   prefixes=principal.prefixes(TOKEN_READ))
        if node is None:
            raise NotFound(NOT_FOUND)
        [body] = await self.present_all(principal, [node])
        return body

    async def list(self, principal: Principal, page: Page, *, ids: list[str],
                   types: list[str], metadata: dict[str, str]) -> Listing:
        if any(has_control_character(key) for key in metadata):
            # No stored key holds one (they are refused on write); a filter key that did could
            # reach across the key-value separator into a value that holds it.
            raise invalid("metadata", "filter keys must not contain control characters")
        kvs = meta_kvs(metadata)
        # A value given twice filters once: the id and type statements seek once per value.
        where = TokenFilter(ids=tuple(dict.fromkeys(ids)), types=tuple(dict.fromkeys(types)),
                            meta_kvs=tuple(kvs))
        nodes = await self.repo.page(
            tenant_id=principal.tenant_id, prefixes=principal.prefixes(TOKEN_READ),
            after=page.after or "", limit=page.size + 1, where=where)
        return await self.listing(principal, nodes, page)

    async def listing(self, principal: Principal, nodes: list[StoredToken],
                      page: Page) -> Listing:
        """A page from up to `page.size + 1` nodes in id order: the extra one says more exist."""
        shown = nodes[:page.size]
        more = len(nodes) > page.size
        return Listing(await self.present_all(principal, shown),
                       shown[-1].id if more else None)

    async def delete(self, principal: Principal, token_id: str) -> None:
        expect(204)  # the write may store its event as the request ends (a 404 ends otherwise)
        if not await self.repo.delete(tenant_id=principal.tenant_id, id=token_id,
                                      prefixes=principal.prefixes(TOKEN_DELETE),
                                      actor=principal.application_id):
            raise NotFound(NOT_FOUND)

    async def update(self, principal: Principal, token_id: str, patch: dict) -> dict:
        prefixes = principal.prefixes(TOKEN_UPDATE)
        # First without the token's lock: read it, then write it by one statement that writes
        # only a token still as read. No transaction is held open while the update is worked
        # out, its expressions rendered; two round trips, not three.
        node = await self.repo.get(tenant_id=principal.tenant_id, id=token_id,
                                   prefixes=prefixes)
        if node is None and not self.repo.reads_may_lag:
            raise NotFound(NOT_FOUND)
        try:
            if node is None:  # a replica's read may lag: decided under the lock, on the leader
                raise Contended("not_found")
            answer = await self._apply_update(self.repo.unlocked(), principal, prefixes, node,
                                              patch)
        except Contended as contended:
            # The token changed meanwhile, or the update may look for a duplicate: again,
            # under the token's lock, as if it had come after whatever changed it.
            metrics.TOKEN_UPDATES_LOCKED.labels(contended.reason).inc()

            async def work(uow: TokenUnitOfWork) -> Shown | Summary:
                node = await uow.lock(tenant_id=principal.tenant_id, id=token_id,
                                      prefixes=prefixes)
                if node is None:
                    raise NotFound(NOT_FOUND) from None
                return await self._apply_update(uow, principal, prefixes, node, patch)

            # The transaction decides what to show; the answer's mask renders after it
            # commits, so no lock is held while it renders. (The token's own expressions
            # render inside it, over the new data: in the renderer's threads when a caller
            # wrote them for Liquid, so such an update holds the token's lock while it waits
            # for a thread.)
            answer = await self.repo.unit_of_work(work)
        [body] = await self.render(principal, [answer])
        return body

    async def _apply_update(self, uow: UnlockedUpdate | TokenUnitOfWork, principal: Principal,
                            prefixes: list[str], node: StoredToken,
                            patch: dict) -> Shown | Summary:
        keys = principal.keys
        current = {
            "data": view.decrypt_field(keys, node, "data"),
            "mask": view.decrypt_field(keys, node, "mask"),
            "metadata": dict(node.metadata or {}),
            "containers": list(node.containers),
            "search_indexes": list(node.search_indexes),
            "fingerprint_expression": node.fingerprint_expression,
            "deduplicate_token": node.deduplicate_token,
            "expires_at": None,
        }
        merged = dict(current)
        for name in ("data", "mask", "metadata"):
            if name in patch:
                merged[name] = merge_patch(current[name], patch[name])
        if "mask" in patch and current["mask"] is None:
            # A token without a mask of its own shows its type's default: a merge patch
            # applies to the mask readers see, not to an empty one.
            merged["mask"] = merge_patch(view.effective_mask(node, None), patch["mask"])
        for name in ("containers", "search_indexes", "fingerprint_expression",
                     "deduplicate_token", "expires_at"):
            if name in patch:
                merged[name] = patch[name]
        if merged["data"] is None:
            raise invalid("data", "may not be removed")
        draft = self._draft(merged, token_type=get_type(node.type))
        if draft.deduplicate and isinstance(uow, UnlockedUpdate) and (
                not node.deduplicate_token or "data" in patch
                or "fingerprint_expression" in patch
                or ("metadata" in patch and not draft.fingerprints_by_its_type())):
            # It may look for a duplicate (dedup turned on, or a fingerprint that may change: a
            # type's own expression reads the data alone, a caller's may read the metadata
            # too): under the dedup lock, in the token's transaction, before anything is
            # rendered.
            raise Contended("dedup")
        if "expires_at" not in patch and node.expires_at is not None:
            draft.expires_at = node.expires_at
        moved = set(draft.containers) ^ set(node.containers)
        if not principal.allowed_on_each(moved, TOKEN_UPDATE):
            # Every container added and every one removed needs the permission on its own.
            raise Forbidden("The application may not move tokens into or out of these "
                            "containers.")
        refusal = update_refusal(
            principal, node.containers, draft.containers,
            changed=[name for name in VIEW_FIELDS if getattr(draft, name) != current[name]])
        if refusal is not None:
            raise Forbidden(refusal)
        # The token's own expressions render again over the new data: off the event loop when
        # a caller wrote them, under the request's one render budget.
        props, digests = await self.renderer.run_where(
            draft.renders_caller_expressions(),
            functools.partial(self._props, principal, node.id, draft))
        props["modified_by"] = principal.application_id
        match = None
        # Only an update that makes the token a duplicate merges it: one that
        # changes its fingerprint, or turns dedup on. An update that leaves both alone (a
        # metadata change) never folds the token into a twin created without dedup.
        if draft.deduplicate and (props["fingerprint"] != node.fingerprint
                                  or not node.deduplicate_token):
            match = await uow.find_duplicate(
                tenant_id=principal.tenant_id, id=node.id, type=node.type,
                fingerprint=props["fingerprint"])
            if match is not None and may_merge(principal, node.containers, match.containers):
                await uow.merge_into(tenant_id=principal.tenant_id, id=node.id,
                                     into=match.id, actor=principal.application_id)
                return dedup_answer(principal, match)
        transform = principal.decide(draft.containers, TOKEN_READ).transform
        if match is None:  # it ends shown under its transform: its write may say so
            expect(200, transform)
        updated = await uow.update(
            tenant_id=principal.tenant_id, id=node.id, prefixes=prefixes, read=node,
            props=props, expires_at=draft.expires_at, meta_kvs=meta_kvs(draft.metadata),
            index_digests=digests)
        if updated is None:  # expired while the update was worked out under its lock
            raise NotFound(NOT_FOUND)
        if match is not None and match_transform(principal, match.containers) is None:
            # A duplicate the caller cannot read: updated, not merged, and answered with the
            # same cut-down summary as on create (a duplicate's contents stay hidden from a caller
            # that may not read it).
            return Summary(match, {"deduplicated": True, "merged": False})
        return Shown(updated, transform, data=draft.data, mask=draft.mask, plaintext_known=True)


def dedup_answer(principal: Principal, match: StoredToken,
                 extras: dict | None = None) -> Shown | Summary:
    """A dedup match as the caller may see it (`auth/token_access.py` `match_transform`): in
    full under its transform, or cut down to a summary."""
    extras = extras or {"deduplicated": True}
    transform = match_transform(principal, match.containers)
    if transform is None:
        return Summary(match, extras)
    return Shown(match, transform, extras=extras)
