"""Stored state read back from Neo4j, and inputs at the edge of the rules (issue 18, point 14):
the search index values and blind-index edges after each kind of change, a 19-digit card, and a
service whose key ring gained a version reading what was written under the old one."""

from __future__ import annotations

import dataclasses
import secrets
from datetime import UTC, datetime

import pytest
from factories import new_tenant

from vaultgraph.app import create_app
from vaultgraph.crypto import KeyRing, TenantKeys
from vaultgraph.search import BLIND_INDEX

from ._support import MASTERCARD, VISA, TokenApi, card, cypher

LAST4 = "{{ data.number | last4 }}"
NUMBER = "{{ data.number }}"
YEAR = "{{ data.expiration_year }}"


async def _tenant_keys(client, ring: KeyRing, tenant_id: str) -> TenantKeys:
    [row] = await cypher(client, "MATCH (t:Tenant {id: $t}) RETURN properties(t) AS props",
                         t=tenant_id)
    return TenantKeys.unwrap(ring, tenant_id, row["props"])


async def _stored_index(client, tenant_id: str, token_id: str) -> tuple[list, set, set]:
    """The token's `search_index_values` property, its HAS_INDEX digests, and the token ids
    those edges name (the edges are self-loops carrying the token id)."""
    [node] = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                  "RETURN t.search_index_values AS values",
                          t=tenant_id, id=token_id)
    edges = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id})-[x:HAS_INDEX]->(u) "
                                 "RETURN x.digest AS digest, x.token_id AS token_id, "
                                 "x.tenant_id AS tenant_id, u = t AS loop",
                         t=tenant_id, id=token_id)
    assert all(e["loop"] and e["tenant_id"] == tenant_id for e in edges), edges
    digests = [e["digest"] for e in edges]
    assert len(digests) == len(set(digests)), digests  # one edge per distinct value
    return node["values"], set(digests), {e["token_id"] for e in edges}


async def test_search_index_values_follow_create_data_change_and_index_change(
        api, client, settings):
    created = await api.create({**card(VISA, expiration_year=2030), "id": "ix-1",
                                "search_indexes": [LAST4]})
    tenant_id = created["tenant_id"]
    keys = await _tenant_keys(client, KeyRing.from_spec(settings.kek), tenant_id)

    def values(*pairs):
        return [keys.index_value(expression, value) for expression, value in pairs]

    def digests(*plain):
        return {keys.index_value(BLIND_INDEX, value) for value in plain}

    assert await _stored_index(client, tenant_id, "ix-1") == (
        values((LAST4, "4242")), digests("4242"), {"ix-1"})

    # a data change re-renders every index: the old value and its edge are gone
    await api.patch("ix-1", {"data": {"number": MASTERCARD}})
    assert await _stored_index(client, tenant_id, "ix-1") == (
        values((LAST4, "4444")), digests("4444"), {"ix-1"})

    # a change that touches neither data nor indexes leaves them as they were
    await api.patch("ix-1", {"metadata": {"k": "v"}})
    assert await _stored_index(client, tenant_id, "ix-1") == (
        values((LAST4, "4444")), digests("4444"), {"ix-1"})

    # an index change: one value per expression, one edge per distinct value
    await api.patch("ix-1", {"search_indexes": [NUMBER, YEAR, "{{ data.number | last4 }}"]})
    assert await _stored_index(client, tenant_id, "ix-1") == (
        values((NUMBER, MASTERCARD), (YEAR, "2030"), (LAST4, "4444")),
        digests(MASTERCARD, "2030", "4444"), {"ix-1"})

    # no indexes: no values, no edges
    await api.patch("ix-1", {"search_indexes": []})
    assert await _stored_index(client, tenant_id, "ix-1") == ([], set(), set())


async def test_a_19_digit_card_number_is_accepted_and_read_back(api, masking):
    number = "4111111111111111110"  # 19 digits, Luhn-valid (the upper bound, tokens/types.py)
    created = await api.create({"type": "card", "data": {"number": number}})
    assert created["data"] == {"number": number}
    assert (await api.get(created["id"]))["data"] == {"number": number}
    masked = await api.get(created["id"], headers=masking)
    assert masked["data"] == {"number": "411111XXXXXXXXX1110"}
    # one digit more is refused, Luhn-valid as it is
    problem = await api.create({"type": "card", "data": {"number": "41111111111111111115"}},
                               expect=400)
    assert "data.number" in problem["errors"], problem


def _spec(version: str) -> str:
    return f"{version}:{KeyRing.generate_spec().partition(':')[2]}"


@pytest.fixture
def key_versions() -> tuple[str, str]:
    """Two KEK versions of this test's own (`k1-…`, `k2-…`): the start-up key check of another
    run's service never meets them."""
    run = secrets.token_hex(4)
    return f"k1-{run}", f"k2-{run}"


async def test_a_service_with_key_ring_k1_k2_reads_what_was_written_under_k1(
        aiohttp_client, settings, key_versions):
    k1, k2 = key_versions
    ring_k1 = _spec(k1)
    ring_k1_k2 = f"{ring_k1},{_spec(k2)}"
    old = await aiohttp_client(create_app(dataclasses.replace(settings, kek=ring_k1)))
    tenant = await new_tenant(old.server.app, "rotation")
    headers = {"SVC-API-KEY": tenant.key}
    old_api = TokenApi(old, headers)
    body = {**card(VISA, expiration_month=12, expiration_year=2030), "id": "under-k1",
            "metadata": {"k": "v"}, "search_indexes": [LAST4]}
    await old_api.create(body)
    [row] = await cypher(old, "MATCH (t:Tenant {id: $t}) RETURN t.wrapped_hmac_key AS hmac, "
                              "t.wrapped_deks AS deks", t=tenant.tenant_id)
    assert row["hmac"].startswith(f"{k1}.") and f"{k2}." not in str(row["deks"]), row

    new = await aiohttp_client(create_app(dataclasses.replace(settings, kek=ring_k1_k2)))
    new_api = TokenApi(new, headers)
    got = await new_api.get("under-k1")
    assert got["data"] == body["data"] and got["metadata"] == {"k": "v"}
    assert [t["id"] for t in (await new_api.list({"metadata.k": "v"}))["data"]] == ["under-k1"]
    resp = await new.post("/tokens/search", json={"query": "data:4242"}, headers=headers)
    assert resp.status == 200 and [t["id"] for t in (await resp.json())["data"]] == ["under-k1"]
    # dedup under the new ring finds the token written under k1 (same keyed fingerprint)
    again = await new_api.create({**body, "id": None, "deduplicate_token": True}, expect=200)
    assert again["id"] == "under-k1"
    # and what the new ring writes, the old one still reads (tenant keys stay wrapped under k1
    # until `vaultgraph keys rotate`)
    await new_api.create({**card(MASTERCARD), "id": "under-k1-k2"})
    assert (await old_api.get("under-k1-k2"))["data"] == {"number": MASTERCARD}


async def test_an_expiry_is_stored_as_the_datetime_given_on_create_and_on_update(api, client):
    """Expiries travel to Neo4j as text (repository/records.py datetime_text) and are stored
    as the zoned DateTime they name, to the microsecond, in UTC: the expiry index and the
    sweeper compare DateTimes, never text."""
    created = await api.create({"type": "token", "data": {"n": "1"}, "id": "exp-1",
                                "expires_at": "2031-05-06T07:08:09.123456+02:00"})
    await api.create({"type": "token", "data": {"n": "2"}, "id": "exp-2"})
    await api.patch("exp-2", {"expires_at": "2032-01-02T03:04:05.5Z"})
    query = ("MATCH (t:Token {tenant_id: $t}) WHERE t.id IN ['exp-1', 'exp-2'] "
             "RETURN t.id AS id, t.expires_at AS at, valueType(t.expires_at) AS type "
             "ORDER BY id")
    rows = await cypher(client, query, t=created["tenant_id"])
    assert [r["type"] for r in rows] == ["ZONED DATETIME NOT NULL"] * 2
    assert [r["at"].to_native() for r in rows] == [
        datetime(2031, 5, 6, 5, 8, 9, 123456, tzinfo=UTC),
        datetime(2032, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)]
    # An update that leaves the expiry alone keeps it; one that clears it clears it.
    await api.patch("exp-1", {"metadata": {"k": "v"}})
    await api.patch("exp-2", {"expires_at": None})
    rows = await cypher(client, query, t=created["tenant_id"])
    assert rows[0]["at"].to_native() == datetime(2031, 5, 6, 5, 8, 9, 123456, tzinfo=UTC)
    assert rows[1]["at"] is None
