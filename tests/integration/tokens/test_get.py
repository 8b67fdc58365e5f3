"""Get a Token (GET /tokens/{id}) and the read transforms of the caller's access rules
(docs/security.md)."""

from __future__ import annotations

import pytest

from ._support import MASTERCARD, VISA, card, cypher, rule


async def test_get_returns_the_token(api, tenant):
    created = await api.create({**card(VISA, cvc="123"), "metadata": {"k": "v"}})
    got = await api.get(created["id"])
    assert got["data"] == {"number": VISA, "cvc": "123"}
    assert got["metadata"] == {"k": "v"}
    assert got["tenant_id"] == tenant.tenant_id
    for field in ("id", "type", "fingerprint", "containers", "created_by", "created_at"):
        assert got[field] == created[field]


async def test_unknown_id_is_404_problem(api):
    problem = await api.get("no-such-token", expect=404)
    assert problem["type"].endswith("/not-found")


async def test_another_tenants_token_is_404_like_an_unknown_id(api, other_tenant_api):
    theirs = await other_tenant_api.create({"id": "their-token", "type": "token", "data": "x"})
    unknown = await api.get("no-such-token", expect=404)
    assert await api.get(theirs["id"], expect=404) == unknown


async def test_get_without_token_read_is_403(api, app_headers):
    writer = await app_headers(rule("/", "reveal", ["token:create"]), permissions=["token:create"])
    created = await api.create({"type": "token", "data": "x"})
    await api.get(created["id"], headers=writer, expect=403)


# --- transforms -----------------------------------------------------------------------------

async def test_revealing_application_sees_the_data(api, revealing):
    created = await api.create(card(VISA, cvc="123"))
    got = await api.get(created["id"], headers=revealing)
    assert got["data"] == {"number": VISA, "cvc": "123"}


async def test_masking_application_sees_the_mask_applied(api, masking):
    created = await api.create(card(MASTERCARD, cvc="123"))
    got = await api.get(created["id"], headers=masking)
    assert got["data"]["number"] == "555555XXXXXX4444"
    assert "cvc" not in got["data"]
    assert MASTERCARD not in str(got)


async def test_redacting_application_sees_neither_data_nor_mask(api, redacting):
    created = await api.create({**card(VISA), "metadata": {"k": "v"}})
    got = await api.get(created["id"], headers=redacting)
    assert "data" not in got and "mask" not in got
    assert got["id"] == created["id"] and got["metadata"] == {"k": "v"}


async def test_plain_permissions_without_rules_mask(api, app_headers):
    # docs/security.md: permissions and no rules behave as one rule on `/` with `mask`.
    plain = await app_headers(permissions=["token:read"])
    created = await api.create(card(VISA))
    assert (await api.get(created["id"], headers=plain))["data"]["number"] == "424242XXXXXX4242"


async def test_first_rule_by_priority_decides_the_transform(api, app_headers):
    headers = await app_headers(rule("/pci/", "mask", ["token:read"], priority=2),
                                rule("/pci/high/", "reveal", ["token:read"], priority=1),
                                permissions=["token:read"])
    high = await api.create(card(VISA))
    low = await api.create({**card(VISA), "containers": ["/pci/low/"]})
    assert (await api.get(high["id"], headers=headers))["data"]["number"] == VISA
    assert (await api.get(low["id"], headers=headers))["data"]["number"] == "424242XXXXXX4242"


async def test_rule_covers_sub_containers(api, bank_only):
    created = await api.create({"type": "us_bank_account_number", "data": "123456789"})
    assert created["containers"] == ["/bank/high/"]
    assert (await api.get(created["id"], headers=bank_only))["data"] == "123456789"


async def test_token_outside_the_callers_rules_is_404_like_an_unknown_id(api, bank_only):
    created = await api.create(card(VISA))
    unknown = await api.get("no-such-token", headers=bank_only, expect=404)
    assert await api.get(created["id"], headers=bank_only, expect=404) == unknown
    assert created["id"] not in await api.ids(headers=bank_only)


async def test_any_container_of_the_token_may_grant_access(api, bank_only):
    created = await api.create({**card(VISA), "containers": ["/pci/high/", "/bank/shared/"]})
    assert (await api.get(created["id"], headers=bank_only))["data"]["number"] == VISA


@pytest.mark.parametrize("token_id", ["a%2Fb", "..", "%00abc", "x" * 500])
async def test_odd_ids_in_the_path_are_404(api, token_id):
    await api.get(token_id, expect=404)


async def test_read_never_writes(api, client, tenant):
    created = await api.create({"type": "token", "data": "x"})
    before = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                  "RETURN properties(t) AS p", t=tenant.tenant_id,
                          id=created["id"])
    await api.get(created["id"])
    after = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                 "RETURN properties(t) AS p", t=tenant.tenant_id,
                         id=created["id"])
    assert before == after


# --- every request carries an API key -------------------------------------------------------

@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/tokens"), ("GET", "/tokens"), ("GET", "/tokens/some-id"),
    ("PATCH", "/tokens/some-id"), ("DELETE", "/tokens/some-id"),
])
@pytest.mark.parametrize("key", [None, "vg_" + "x" * 43, "not-a-key"])
async def test_token_routes_need_a_valid_api_key(client, method, path, key):
    headers = {} if key is None else {"SVC-API-KEY": key}
    resp = await client.request(method, path, headers=headers, json={})
    assert resp.status == 401
    assert resp.content_type == "application/problem+json"
