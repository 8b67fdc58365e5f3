"""Token expiration (docs/tokens-and-expressions.md, "Expiration input"): input formats, the
future rule, the ISO 8601 answer, and an expired token vanishing at once."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import pytest

from ._support import assert_names, cypher

ISO_WITH_OFFSET = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}:\d{2}")
YEAR = datetime.now(UTC).year + 2


async def expires(api, value: str) -> datetime:
    body = await api.create({"type": "token", "data": 1, "expires_at": value})
    assert ISO_WITH_OFFSET.fullmatch(body["expires_at"]), body["expires_at"]
    got = await api.get(body["id"])
    assert got["expires_at"] == body["expires_at"]
    return datetime.fromisoformat(body["expires_at"])


async def expire_now(client, tenant_id: str, token_id: str) -> None:
    """Move a token's expiry into the past (quicker than waiting for it)."""
    await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                         "SET t.expires_at = datetime() - duration('PT1S')",
                 t=tenant_id, id=token_id)


# --- by default a token does not expire -----------------------------------------------------

async def test_by_default_a_token_does_not_expire(api, client, tenant):
    body = await api.create({"type": "token", "data": 1})
    assert "expires_at" not in body
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                "RETURN t.expires_at AS e", t=tenant.tenant_id, id=body["id"])
    assert rows == [{"e": None}]


# --- the input formats ----------------------------------------------------------------------

async def test_datetime_with_offset(api):
    at = await expires(api, f"3/4/{YEAR} 1:05:06 PM +02:00")
    assert at == datetime(YEAR, 3, 4, 11, 5, 6, tzinfo=UTC)


async def test_datetime_with_negative_offset(api):
    at = await expires(api, f"12/31/{YEAR} 11:59:59 PM -05:30")
    assert at == datetime(YEAR + 1, 1, 1, 5, 29, 59, tzinfo=UTC)


async def test_datetime_without_offset_is_utc(api):
    # a date and time without an offset is UTC
    assert await expires(api, f"3/4/{YEAR} 1:05:06 PM") == datetime(YEAR, 3, 4, 13, 5, 6,
                                                                     tzinfo=UTC)


@pytest.mark.parametrize(("clock", "hour"), [("12:00:00 AM", 0), ("12:30:00 PM", 12),
                                             ("1:00:00 am", 1), ("11:00:00 PM", 23)])
async def test_twelve_hour_clock(api, clock, hour):
    at = await expires(api, f"07/09/{YEAR} {clock}")
    assert (at.hour, at.minute) == (hour, 30 if clock.startswith("12:30") else 0)


async def test_short_date_is_midnight_utc(api):
    # a date alone expires at midnight UTC
    assert await expires(api, f"2/29/{YEAR + (4 - YEAR % 4) % 4}") == datetime(
        YEAR + (4 - YEAR % 4) % 4, 2, 29, tzinfo=UTC)
    assert await expires(api, f"11/5/{YEAR}") == datetime(YEAR, 11, 5, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    (f"{YEAR}-03-04T13:05:06+05:30", datetime(YEAR, 3, 4, 7, 35, 6, tzinfo=UTC)),
    (f"{YEAR}-03-04T13:05:06Z", datetime(YEAR, 3, 4, 13, 5, 6, tzinfo=UTC)),
    (f"{YEAR}-03-04T13:05:06", datetime(YEAR, 3, 4, 13, 5, 6, tzinfo=UTC)),
    (f"{YEAR}-03-04", datetime(YEAR, 3, 4, tzinfo=UTC)),
    (f"{YEAR}-03-04T13:05:06.250-01:00", datetime(YEAR, 3, 4, 14, 5, 6, 250000, tzinfo=UTC)),
])
async def test_iso_8601_is_accepted_and_no_offset_is_utc(api, text, expected):
    assert await expires(api, text) == expected


# One example per rule here; the full table is a unit test (tests/unit/test_token_fields.py).
@pytest.mark.parametrize("text", ["tomorrow", "1/1/2099 1:00:00 AM +25:00", ""])
async def test_unparseable_expires_at_is_400_naming_it(api, text):
    problem = await api.create({"type": "token", "data": 1, "expires_at": text}, expect=400)
    assert_names(problem, "expires_at")
    if text.strip():
        assert text not in str(problem)


async def test_expires_at_must_be_a_string(api):
    assert_names(await api.create({"type": "token", "data": 1, "expires_at": 4102444800},
                                  expect=400), "expires_at")


@pytest.mark.parametrize("text", ["1/1/2000", "1/1/2000 1:00:00 PM +01:00",
                                  "2000-01-01T00:00:00Z"])
async def test_expires_at_in_the_past_is_400(api, text):
    problem = await api.create({"type": "token", "data": 1, "expires_at": text}, expect=400)
    assert problem["errors"]["expires_at"] == ["must be in the future"]


async def test_expires_at_now_is_400(api):
    now = datetime.now(UTC).isoformat()
    assert_names(await api.create({"type": "token", "data": 1, "expires_at": now},
                                  expect=400), "expires_at")


async def test_expires_at_is_stored_as_a_datetime(api, client, tenant):
    body = await api.create({"type": "token", "data": 1, "expires_at": f"1/2/{YEAR}"})
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                "RETURN t.expires_at AS e", t=tenant.tenant_id, id=body["id"])
    assert rows[0]["e"].to_native() == datetime(YEAR, 1, 2, tzinfo=UTC)


# --- a token expires at expires_at: an expired token is gone at once ------------------------------

async def test_token_expires_at_its_time(api):
    soon = datetime.now(UTC) + timedelta(seconds=4)  # the create and first read fit in it
    body = await api.create({"type": "token", "data": 1, "expires_at": soon.isoformat()})
    await api.get(body["id"])
    # Poll (bounded) until it reads as gone.
    while (resp := await api.client.get(f"/tokens/{body['id']}", headers=api.headers)).status \
            == 200:
        assert datetime.now(UTC) < soon + timedelta(seconds=30), "still readable"
        await asyncio.sleep(0.05)
    assert resp.status == 404
    await api.get(body["id"], expect=404)


async def test_expired_token_reads_like_an_unknown_id(api, client, tenant):
    body = await api.create({"type": "token", "data": 1, "metadata": {"k": "v"},
                             "expires_at": f"1/1/{YEAR}"})
    await expire_now(client, tenant.tenant_id, body["id"])
    unknown = await api.get("no-such-token", expect=404)
    assert await api.get(body["id"], expect=404) == unknown
    assert await api.patch(body["id"], {"data": 2}, expect=404) == await api.patch(
        "no-such-token", {"data": 2}, expect=404)
    assert await api.delete(body["id"], expect=404) == await api.delete("no-such-token",
                                                                        expect=404)


async def test_expired_token_is_absent_from_every_list(api, client, tenant):
    live = await api.create({"type": "token", "data": 1, "metadata": {"k": "v"}})
    body = await api.create({"type": "token", "data": 2, "metadata": {"k": "v"},
                             "expires_at": f"1/1/{YEAR}"})
    assert sorted(await api.ids()) == sorted([live["id"], body["id"]])
    await expire_now(client, tenant.tenant_id, body["id"])
    assert await api.ids() == [live["id"]]
    assert await api.ids([("type", "token")]) == [live["id"]]
    assert await api.ids([("metadata.k", "v")]) == [live["id"]]
    assert await api.ids([("id", body["id"])]) == []


async def test_id_of_an_expired_token_is_free_at_once(api, client, tenant):
    await api.create({"id": "short-lived", "type": "token", "data": "old",
                      "expires_at": f"1/1/{YEAR}"})
    await expire_now(client, tenant.tenant_id, "short-lived")
    again = await api.create({"id": "short-lived", "type": "token", "data": "new"})
    assert again["id"] == "short-lived"
    assert (await api.get("short-lived"))["data"] == "new"
    rows = await cypher(client, "MATCH (d:DeletedToken {tenant_id: $t, id: 'short-lived'}) "
                                "RETURN d.deleted_reason AS reason, d.data_ct AS data",
                        t=tenant.tenant_id)
    assert rows == [{"reason": "expired", "data": None}]
