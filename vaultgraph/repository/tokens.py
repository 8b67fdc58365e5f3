"""Tokens in Neo4j: one method per use, each running its statement from cypher/tokens/.

Methods return `StoredToken`s (ciphertext and keyed digests, never plaintext). An update reads
its token (`get`), then writes it by one statement that writes only a token still as read
(`TokenRepository.unlocked`); one that cannot (the token changed meanwhile, or the update must
look for a duplicate under the dedup lock) runs again under the token's lock, its statements in
one transaction (`TokenRepository.unit_of_work`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from ..errors import UniquenessViolation
from ..tokens.stored import StoredToken
from .coalesce import ReadTogether, Together
from .database import Database, Transaction
from .records import datetime_text, one_list

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Created:
    token: StoredToken
    deduplicated: bool  # True: an existing token of the same fingerprint, returned instead


@dataclass(frozen=True, slots=True)
class NewToken:
    """One row of a bulk create: the item's place in the request and what to store."""

    index: int
    id: str
    props: dict
    expires_at: datetime | None
    meta_kvs: list[str]
    dedup: bool
    index_digests: list[str]


class Contended(Exception):
    """An update written without the token's lock could not be: the token is no longer as it
    was read (changed, deleted, expired or merged meanwhile), or the update may look for a
    duplicate, which only its lock makes safe. Run it again under the lock. `reason`: why
    (`changed`, `dedup`, `not_found`), for the metric."""

    def __init__(self, reason: str = "changed"):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class TokenFilter:
    """What a list asks for; the statement that answers it from an index is chosen here."""

    ids: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    meta_kvs: tuple[str, ...] = ()

    def statement(self) -> str:
        if self.ids:
            return "tokens/list_by_ids"
        if self.meta_kvs:
            return "tokens/list_by_metadata"
        if self.types:
            return "tokens/list_by_type"
        return "tokens/list"


def _token(record: Any, key: str = "token") -> StoredToken:
    return StoredToken.from_properties(record[key])


class TokenRepository:
    def __init__(self, db: Database, *, create_lanes: int = 2, create_batch_max: int = 10,
                 get_lanes: int = 2, get_batch_max: int = 16):
        """`create_lanes`, `create_batch_max`: creates written together (`Together`);
        `get_lanes`, `get_batch_max`: gets read together (`ReadTogether`)."""
        self._db = db
        self._creates = (Together(db, "tokens/create", "tokens/create_batch",
                                  lanes=create_lanes, max_rows=create_batch_max)
                         if create_batch_max > 1 else None)
        # Gets of the same readable prefixes share a statement, each its own row and tenant.
        self._gets = (ReadTogether(db, "tokens/get", "tokens/get_batch", shared=("prefixes",),
                                   lanes=get_lanes, max_rows=get_batch_max)
                      if get_batch_max > 1 else None)

    async def create(self, *, tenant_id: str, id: str, props: dict, expires_at: datetime | None,
                     meta_kvs: list[str], index_digests: list[str], dedup: bool,
                     parent_id: str | None = None,
                     parent_prefixes: list[str] | None = None,
                     expired: tuple[str, str]) -> Created | None:
        """The created (or, with dedup, the existing) token; None when the parent is not found.

        `expired` is the (deleted_by, deleted_reason) given to an expired token that still
        holds the id: it is retired as the expiry sweeper would retire it.
        """
        expires = datetime_text(expires_at)
        params = dict(tenant_id=tenant_id, id=id, props=props, expires_at=expires,
                      meta_kvs=meta_kvs, index_digests=index_digests, dedup=dedup,
                      parent_id=parent_id, parent_prefixes=parent_prefixes or [],
                      expired_actor=expired[0], expired_reason=expired[1])
        if dedup or self._creates is None:
            records = await self._db.write("tokens/create", **params)
            if not records:
                return None
            return Created(_token(records[0]), records[0]["deduplicated"])
        # A create that does not deduplicate, under a parent or not, may be written together
        # with others (repository/coalesce.py): those under a parent with the same readable
        # prefixes.
        record = await self._creates.write(
            params, {"expired_actor": expired[0], "expired_reason": expired[1],
                     "parent_prefixes": params["parent_prefixes"]},
            {"tenant_id": tenant_id, "id": id, "props": props, "expires_at": expires,
             "meta_kvs": meta_kvs, "dedup": False, "index_digests": index_digests,
             "parent_id": parent_id})
        if record is None:  # the parent is not found
            return None
        if record["taken"]:  # a live token holds the id, as the uniqueness constraint says alone
            raise UniquenessViolation()
        return Created(_token(record), record["deduplicated"])

    async def create_many(self, *, tenant_id: str, rows: list[NewToken],
                          expired: tuple[str, str]) -> dict[int, Created | None]:
        """Create each row's token in one statement (tokens/create_many): by row index, the
        created token (or, with dedup, the existing one), or None when a live token holds the
        row's id. A create that raced one of the ids onto the uniqueness constraint rolled the
        whole statement back; it runs once more, and then reads that id as taken."""
        params = dict(
            expired_actor=expired[0], expired_reason=expired[1],
            rows=[{"index": r.index, "tenant_id": tenant_id, "id": r.id, "props": r.props,
                   "expires_at": datetime_text(r.expires_at), "meta_kvs": r.meta_kvs,
                   "dedup": r.dedup, "index_digests": r.index_digests}
                  for r in rows])
        try:
            records = await self._db.write("tokens/create_many", **params)
        except UniquenessViolation:
            records = await self._db.write("tokens/create_many", **params)
        return {r["index"]: None if r["taken"] else Created(_token(r), r["deduplicated"])
                for r in records}

    async def get(self, *, tenant_id: str, id: str, prefixes: list[str]) -> StoredToken | None:
        """A live token whose containers lie under one of `prefixes`."""
        params = {"tenant_id": tenant_id, "id": id, "prefixes": prefixes}
        if self._gets is None:
            records = await self._db.read("tokens/get", **params)
            return _token(records[0]) if records else None
        # It may be read together with others (repository/coalesce.py).
        record = await self._gets.read(params)
        return None if record is None else _token(record)

    async def page(self, *, tenant_id: str, prefixes: list[str], after: str, limit: int,
                   where: TokenFilter) -> list[StoredToken]:
        """Up to `limit` visible tokens after id `after`, in id order, matching `where`."""
        records = await self._db.read(
            where.statement(), tenant_id=tenant_id, prefixes=prefixes, after=after,
            limit=limit, ids=list(where.ids) or None, types=list(where.types) or None,
            meta_kvs=list(where.meta_kvs))
        return [StoredToken.from_properties(t) for t in one_list(records, "tokens")]

    async def delete(self, *, tenant_id: str, id: str, prefixes: list[str], actor: str) -> bool:
        """Turn a visible live token into an audit reference; False when none was visible."""
        records = await self._db.write(
            "tokens/delete", tenant_id=tenant_id, id=id, prefixes=prefixes, actor=actor,
            reason="deleted", merged_into=None)
        return bool(records)

    async def unit_of_work(self, work: Callable[[TokenUnitOfWork], Awaitable[T]]) -> T:
        """Run `work` in one write transaction (retried whole on transient errors)."""
        return await self._db.transaction(lambda tx: work(TokenUnitOfWork(tx)))

    @property
    def reads_may_lag(self) -> bool:
        """Whether a read may miss a write made through another replica (`Database`)."""
        return self._db.reads_may_lag

    def unlocked(self) -> UnlockedUpdate:
        """The writes of an update of a token read without its lock (`get`)."""
        return UnlockedUpdate(self._db)


class UnlockedUpdate:
    """An update of a token read without its lock: its write is one statement, which takes the
    lock and writes only if the token is still as read. Whatever needs the lock for longer
    raises `Contended`, and the update runs again under the lock (`TokenUnitOfWork`)."""

    __slots__ = ("_db",)

    def __init__(self, db: Database):
        self._db = db

    async def find_duplicate(self, *, tenant_id: str, id: str, type: str,
                             fingerprint: str) -> StoredToken | None:
        """A duplicate is looked for, and merged, under the dedup lock, in one transaction."""
        raise Contended("dedup")

    async def merge_into(self, *, tenant_id: str, id: str, into: str, actor: str) -> None:
        raise Contended("dedup")  # never reached: `find_duplicate` raised first

    async def update(self, *, tenant_id: str, id: str, prefixes: list[str], read: StoredToken,
                     props: dict[str, Any], expires_at: datetime | None, meta_kvs: list[str],
                     index_digests: list[str]) -> StoredToken:
        """Write the token if it is still as `read`: otherwise raise `Contended`, nothing
        written (the request's audit event neither: its next write sends it)."""
        records = await self._db.write(
            "tokens/update", **_update_params(tenant_id, id, prefixes, read, props, expires_at,
                                              meta_kvs, index_digests))
        if not records:
            raise Contended()
        return _token(records[0])


def _update_params(tenant_id: str, id: str, prefixes: list[str], read: StoredToken,
                   props: dict[str, Any], expires_at: datetime | None, meta_kvs: list[str],
                   index_digests: list[str]) -> dict[str, Any]:
    # The data's ciphertext stands for the token as read: every write of a live token's
    # properties encrypts its data again, under a new nonce (cypher/tokens/update).
    return {"tenant_id": tenant_id, "id": id, "prefixes": prefixes, "read_data_ct": read.data_ct,
            "props": props, "expires_at": datetime_text(expires_at), "meta_kvs": meta_kvs,
            "index_digests": index_digests}


class TokenUnitOfWork:
    """The statements of one update, in one transaction: lock, read, maybe merge, write."""

    __slots__ = ("_tx",)

    def __init__(self, tx: Transaction):
        self._tx = tx

    async def lock(self, *, tenant_id: str, id: str, prefixes: list[str]) -> StoredToken | None:
        """Write-lock a visible live token before reading it (no lost update)."""
        records = await self._tx.run("tokens/lock_for_update", tenant_id=tenant_id, id=id,
                                     prefixes=prefixes)
        return _token(records[0]) if records else None

    async def find_duplicate(self, *, tenant_id: str, id: str, type: str,
                             fingerprint: str) -> StoredToken | None:
        """The oldest other live token of this type and fingerprint (under the dedup lock)."""
        records = await self._tx.run("tokens/find_duplicate", tenant_id=tenant_id, id=id,
                                     type=type, fingerprint=fingerprint)
        return _token(records[0]) if records else None

    async def merge_into(self, *, tenant_id: str, id: str, into: str, actor: str) -> None:
        """Move token `id`'s links onto `into`, then retire `id` as deduplicated."""
        await self._tx.run("tokens/move_edges", tenant_id=tenant_id, id=id, into=into)
        await self._tx.run("tokens/delete", tenant_id=tenant_id, id=id, prefixes=["/"],
                           actor=actor, reason="deduplicated", merged_into=into)

    async def update(self, *, tenant_id: str, id: str, prefixes: list[str], read: StoredToken,
                     props: dict[str, Any], expires_at: datetime | None, meta_kvs: list[str],
                     index_digests: list[str]) -> StoredToken | None:
        """Write the token locked as `read` (`lock`); None when it expired since it was
        locked (the statement checks again), nothing written."""
        records = await self._tx.run(
            "tokens/update", **_update_params(tenant_id, id, prefixes, read, props, expires_at,
                                              meta_kvs, index_digests))
        return _token(records[0]) if records else None
