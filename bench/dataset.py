"""The data set: a tenant, a masked-read application and N card tokens loaded in batches.

Rows go through the service's own code: `TenantKeys.encrypt_json` for data, the card type's
fingerprint expression rendered by `vaultgraph.expressions.render` and keyed with
`TenantKeys.fingerprint`, metadata in the indexed `key<US>value` form of `services.tokens`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import orjson

from vaultgraph.applications.model import ApplicationDraft
from vaultgraph.auth import apikeys
from vaultgraph.auth.permissions import TOKEN_PERMISSIONS
from vaultgraph.auth.rules import MASK, Rule
from vaultgraph.crypto import KeyRing, TenantKeys
from vaultgraph.expressions import render
from vaultgraph.repository.applications import ApplicationRepository
from vaultgraph.repository.database import Database
from vaultgraph.repository.tenants import TenantRepository
from vaultgraph.services.tenants import TenantService
from vaultgraph.services.tokens import meta_kvs
from vaultgraph.tokens.types import get_type

from .environment import say

CYPHER = Path(__file__).resolve().parent / "cypher"
CARD = get_type("card")
REGIONS = ("eu-west", "eu-north", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af")
PER_CUSTOMER = 50  # tokens per customer_id: a metadata filter on it fills one page of 50


@dataclass
class Tenant:
    tenant_id: str
    admin_key: str
    app_id: str
    app_key: str      # plain permissions under one `mask` rule: reads come back masked
    keys: TenantKeys


def card_number(i: int) -> str:
    """A Luhn-valid 16-digit number, unique per i."""
    body = f"4{i:014d}"
    total = 0
    for pos, ch in enumerate(reversed(body)):
        d = int(ch)
        if pos % 2 == 0:  # doubled: these sit at odd positions once the check digit is appended
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def card_data(i: int) -> dict:
    return {"number": card_number(i), "expiration_month": 1 + i % 12,
            "expiration_year": 2027 + i % 5, "cvc": f"{i % 1000:03d}"}


def card_metadata(i: int) -> dict[str, str]:
    return {"customer_id": customer(i // PER_CUSTOMER), "region": REGIONS[i % len(REGIONS)]}


def customer(n: int) -> str:
    return f"cus_{n:07d}"


def card_props(keys: TenantKeys, token_id: str, data: dict, metadata: dict) -> dict:
    """What TokenService._props sends for a card without mask or search indexes."""
    expression = CARD.default_fingerprint_expression
    return {
        "type": "card",
        "data_ct": keys.encrypt_json(data, token_id=token_id, field="data"),
        "mask_ct": None,
        "fingerprint": keys.fingerprint(render(expression, data=data, metadata=metadata,
                                               allow_empty=False)),
        "fingerprint_expression": expression,
        "containers": list(CARD.default_containers),
        "metadata": orjson.dumps(metadata).decode(),
        "search_indexes": [],
        "search_index_values": [],
        "deduplicate_token": False,
    }


def token_row(keys: TenantKeys, app_id: str, i: int) -> dict:
    token_id = str(uuid.uuid4())
    metadata = card_metadata(i)
    props = card_props(keys, token_id, card_data(i), metadata)
    return {"id": token_id, "meta_kvs": meta_kvs(metadata),
            "props": {**props, "created_by": app_id}}


async def create_bench_tenant(db: Database, ring: KeyRing) -> Tenant:
    admin = await TenantService(TenantRepository(db), ring).create("bench")
    app_id, key = str(uuid.uuid4()), apikeys.generate()
    draft = ApplicationDraft(
        name="bench (masked reads)", permissions=tuple(sorted(TOKEN_PERMISSIONS)),
        rules=(Rule(container="/", transform=MASK, permissions=frozenset(TOKEN_PERMISSIONS),
                    description="everything, masked"),))
    await ApplicationRepository(db).create(admin.tenant_id, app_id, draft, created_by=None,
                                           key_id=str(uuid.uuid4()), key_hash=apikeys.digest(key))
    records = await db.read("auth/authenticate", hash=apikeys.digest(key))
    keys = TenantKeys.unwrap(ring, admin.tenant_id, records[0]["tenant"])
    return Tenant(admin.tenant_id, admin.key, app_id, key, keys)


async def load_tokens(db: Database, tenant: Tenant, start: int, stop: int,
                      batch: int) -> list[str]:
    """Tokens number `start` to `stop - 1`; their ids, in that order."""
    load = (CYPHER / "load_tokens.cypher").read_text()
    link = (CYPHER / "load_links.cypher").read_text()
    ids: list[str] = []
    began = time.monotonic()

    def prepare(lo: int, hi: int) -> list[dict]:
        return [token_row(tenant.keys, tenant.app_id, i) for i in range(lo, hi)]

    async def write(rows: list[dict], links: list[dict]) -> None:
        async with db.driver.session(database=db.database) as session:
            await session.execute_write(_run, load, {"tenant_id": tenant.tenant_id,
                                                     "rows": rows})
            await session.execute_write(_run, link, {"tenant_id": tenant.tenant_id,
                                                     "links": links})

    # Encrypt the next batch in a thread while the current one is written.
    bounds = [(lo, min(lo + batch, stop)) for lo in range(start, stop, batch)]
    pending = asyncio.create_task(asyncio.to_thread(prepare, *bounds[0])) if bounds else None
    for n, _ in enumerate(bounds):
        rows = await pending
        if n + 1 < len(bounds):
            pending = asyncio.create_task(asyncio.to_thread(prepare, *bounds[n + 1]))
        first = start + len(ids)
        ids.extend(row["id"] for row in rows)
        # Each customer's first token is the parent of the customer's other tokens.
        links = [{"parent": ids[root(i) - start], "child": ids[i - start]}
                 for i in range(first, first + len(rows)) if root(i) != i and root(i) >= start]
        await write(rows, links)
        if (n + 1) % 10 == 0 or n + 1 == len(bounds):
            done = start + len(ids)
            rate = len(ids) / (time.monotonic() - began)
            say(f"loaded {done:,} tokens ({rate:,.0f}/s)")
    return ids


def root(i: int) -> int:
    """The number of token `i`'s customer's first token: the parent of the others."""
    return i // PER_CUSTOMER * PER_CUSTOMER


async def _run(tx, text: str, params: dict) -> None:
    result = await tx.run(text, params)
    await result.consume()
