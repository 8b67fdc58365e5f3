"""Outbound proxies in Neo4j: one method per statement in cypher/proxies/.

Every statement is scoped by the caller's `tenant_id`: another tenant's proxy is
indistinguishable from one that does not exist. A proxy holds configuration only (a name, a
destination URL, a header allowlist), never token data.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..tokens.stored import StoredToken
from .database import Database

# The first page starts after this position: earlier than any created_at, before any id.
BEGINNING = ("0001-01-01T00:00:00Z", "")


@dataclass(frozen=True)
class Proxy:
    id: str
    name: str
    destination_url: str
    description: str | None
    header_allowlist: tuple[str, ...]
    created_at: datetime
    created_by: str | None
    modified_at: datetime | None


@dataclass(frozen=True, slots=True)
class Route:
    """What a call needs of its proxy: where it goes, and which headers it may fill in."""

    id: str
    destination_url: str
    header_allowlist: tuple[str, ...]


def _native(value) -> datetime | None:
    return value.to_native() if value is not None else None


def _proxy(raw: dict) -> Proxy:
    return Proxy(id=raw["id"], name=raw["name"], destination_url=raw["destination_url"],
                 description=raw["description"],
                 header_allowlist=tuple(raw["header_allowlist"] or ()),
                 created_at=_native(raw["created_at"]), created_by=raw["created_by"],
                 modified_at=_native(raw["modified_at"]))


class ProxyRepository:
    def __init__(self, db: Database):
        self._db = db

    async def create(self, tenant_id: str, proxy_id: str, *, name: str, destination_url: str,
                     description: str | None, header_allowlist: list[str],
                     created_by: str | None) -> Proxy:
        records = await self._db.write(
            "proxies/create", tenant_id=tenant_id, id=proxy_id, name=name,
            destination_url=destination_url, description=description,
            header_allowlist=header_allowlist, created_by=created_by)
        return _proxy(records[0]["proxy"])

    async def get(self, tenant_id: str, proxy_id: str) -> Proxy | None:
        records = await self._db.read("proxies/get", tenant_id=tenant_id, id=proxy_id)
        return _proxy(records[0]["proxy"]) if records else None

    async def for_call(self, tenant_id: str, proxy_id: str, *, ids: list[str],
                       prefixes: list[str]) -> tuple[Route | None, list[StoredToken]]:
        """The proxy's route, and those of the tokens `ids` the caller (`prefixes`) may see,
        in one read; (None, []) when there is no such proxy."""
        records = await self._db.read("proxies/call", tenant_id=tenant_id, id=proxy_id,
                                      ids=ids, prefixes=prefixes)
        if not records:
            return None, []
        raw = records[0]["proxy"]
        return (Route(raw["id"], raw["destination_url"],
                      tuple(raw["header_allowlist"] or ())),
                [StoredToken.from_properties(t) for t in records[0]["tokens"]])

    async def page(self, tenant_id: str, after: tuple[str, str] | None,
                   limit: int) -> list[tuple[Proxy, tuple[str, str]]]:
        """Up to `limit` proxies after the position, each with its own position."""
        after_at, after_id = after or BEGINNING
        records = await self._db.read("proxies/list", tenant_id=tenant_id, after_at=after_at,
                                      after_id=after_id, limit=limit)
        return [(_proxy(r["proxy"]), (r["position"], r["proxy"]["id"])) for r in records]

    async def update(self, tenant_id: str, proxy_id: str, changes: dict[str, Any], *,
                     modified_by: str | None) -> Proxy | None:
        """Each field of `changes` replaced (None removes it); None when there is no proxy."""
        records = await self._db.write("proxies/update", tenant_id=tenant_id, id=proxy_id,
                                       changes=changes, modified_by=modified_by)
        return _proxy(records[0]["proxy"]) if records else None

    async def delete(self, tenant_id: str, proxy_id: str) -> bool:
        records = await self._db.write("proxies/delete", tenant_id=tenant_id, id=proxy_id)
        return bool(records)
