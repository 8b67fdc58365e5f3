"""Every refused write leaves nothing changed: the tenant's nodes and edges, read back through
the driver (tests/support/snapshot.py), are the same before and after each refusal — and, for a
refusal about another tenant's token, that tenant's too."""

from __future__ import annotations

import orjson
import pytest
from factories import key_headers, make_application, new_tenant
from support.snapshot import Unchanged, tenant_snapshot
from tokens._support import MASTERCARD, VISA, TokenApi, card, rule

READ_ALL = rule("/", "reveal", permissions=["token:read"])


@pytest.fixture
async def seeded(client, tenant, admin_headers) -> TokenApi:
    """A card `c-1` with metadata and a search index, a bank token `b-1`, a plain token `p-1`
    as parent of `c-1`."""
    api = TokenApi(client, admin_headers)
    await api.create({**card(expiration_month=12, expiration_year=2030), "id": "c-1",
                      "metadata": {"k": "v"}, "search_indexes": ["{{ data.number | last4 }}"]})
    await api.create({"id": "b-1", "type": "bank",
                      "data": {"routing_number": "021000021", "account_number": "73920485617"}})
    await api.create({"id": "p-1", "type": "token", "data": "parent"})
    assert (await client.post("/tokens/p-1/children/c-1", headers=admin_headers)).status == 201
    return api


async def _app(client, admin_headers, *rules, permissions=None) -> dict[str, str]:
    perms = permissions if permissions is not None else sorted(
        {p for r in rules for p in r["permissions"]})
    return key_headers(await make_application(client, admin_headers, permissions=perms,
                                              rules=list(rules) or None))


async def _status(resp, expected: int) -> dict:
    body = await resp.read()
    assert resp.status == expected, (resp.status, body[:300])
    return orjson.loads(body) if body else {}


# ---- create ----------------------------------------------------------------------------------

async def test_create_without_permission_or_outside_the_callers_containers(
        client, tenant, admin_headers, seeded):
    reader = await _app(client, admin_headers, READ_ALL)
    bank_writer = await _app(client, admin_headers,
                             rule("/bank/", "reveal", permissions=["token:create", "token:read"]))
    async with Unchanged(client, tenant.tenant_id):
        await _status(await client.post("/tokens", json=card(MASTERCARD), headers=reader), 403)
        # a card's default container is /pci/high/, outside the caller's /bank/
        await _status(await client.post("/tokens", json=card(MASTERCARD),
                                        headers=bank_writer), 403)
        await _status(await client.post("/tokens", json={**card(MASTERCARD),
                                                         "containers": ["/bank/", "/pci/"]},
                                        headers=bank_writer), 403)
        await _status(await client.post("/tokens", json={**card(MASTERCARD), "id": "n-1",
                                                         "deduplicate_token": True},
                                        headers=bank_writer), 403)


async def test_a_taken_id_is_a_409_and_the_holder_stays_as_it_was(client, tenant, seeded):
    async with Unchanged(client, tenant.tenant_id):
        problem = await _status(await client.post(
            "/tokens", json={**card(MASTERCARD), "id": "c-1", "metadata": {"other": "1"},
                             "search_indexes": ["{{ data.number }}"]},
            headers=seeded.headers), 409)
        assert problem["type"].endswith("/conflict"), problem
        await _status(await client.post("/tokens", json={"id": "b-1", "type": "token",
                                                         "data": "x"},
                                        headers=seeded.headers), 409)


# ---- update ----------------------------------------------------------------------------------

async def test_refused_updates_change_nothing(client, tenant, admin_headers, seeded):
    no_update = await _app(client, admin_headers, READ_ALL)
    masking_updater = await _app(client, admin_headers, rule("/", "mask"))
    bank_updater = await _app(client, admin_headers, rule("/", "reveal", permissions=[
        "token:read"]), rule("/bank/", "reveal", permissions=["token:update"]))
    patch = {"data": {"number": MASTERCARD}, "metadata": {"k": None, "n": "1"}}
    async with Unchanged(client, tenant.tenant_id):
        await seeded.patch("c-1", patch, headers=no_update, expect=403)
        # plaintext-revealing changes take a reveal rule (docs/security.md)
        await seeded.patch("c-1", {"mask": {"number": "{{ data.number }}"}},
                           headers=masking_updater, expect=403)
        await seeded.patch("c-1", {"search_indexes": ["{{ data.number }}"]},
                           headers=masking_updater, expect=403)
        # update on /bank/ only: the card is outside its update rules (404, as unknown);
        # moving the bank token to /pci/ is refused
        await seeded.patch("c-1", patch, headers=bank_updater, expect=404)
        await seeded.patch("b-1", {"containers": ["/pci/"]}, headers=bank_updater, expect=403)
        await seeded.patch("no-such-token", patch, expect=404)
        await seeded.patch("c-1", {"data": {"number": "4242424242424241"}}, expect=400)
        await seeded.patch("c-1", patch, expect=415, content_type="application/json")


async def test_an_update_of_another_tenants_token_is_a_404_and_changes_neither(
        client, tenant, seeded):
    other = await new_tenant(client.server.app, "other")
    other_api = TokenApi(client, {"SVC-API-KEY": other.key})
    await other_api.create({**card(), "id": "theirs"})
    theirs = await tenant_snapshot(client, other.tenant_id)
    async with Unchanged(client, tenant.tenant_id):
        await seeded.patch("theirs", {"metadata": {"n": "1"}}, expect=404)
        await seeded.delete("theirs", expect=404)
        await _status(await client.post("/tokens/p-1/children/theirs",
                                        headers=seeded.headers), 404)
    assert (await tenant_snapshot(client, other.tenant_id)).diff(theirs) == {}


# ---- links and child tokens ------------------------------------------------------------------

async def test_refused_links_and_child_tokens_change_nothing(client, tenant, admin_headers,
                                                             seeded):
    no_read = await _app(client, admin_headers, permissions=["token:create"])
    general_only = await _app(client, admin_headers, rule(
        "/general/", "reveal", permissions=["token:create", "token:read", "token:delete"]))
    no_delete = await _app(client, admin_headers, READ_ALL)
    async with Unchanged(client, tenant.tenant_id):
        await _status(await client.post("/tokens/p-1/children/b-1", headers=no_read), 403)
        await _status(await client.post("/tokens/p-1/children", json=card(MASTERCARD),
                                        headers=no_read), 403)
        # the child's containers (/pci/high/) are outside the caller's /general/
        await _status(await client.post("/tokens/p-1/children", json=card(MASTERCARD),
                                        headers=general_only), 403)
        await _status(await client.post("/tokens/p-1/children", json={
            "type": "token", "data": "x", "containers": ["/pci/"]}, headers=general_only), 403)
        # an end the caller cannot read answers like an unknown one
        await _status(await client.post("/tokens/p-1/children/c-1", headers=general_only), 404)
        await _status(await client.post("/tokens/p-1/children/b-1", headers=general_only), 404)
        await _status(await client.post("/tokens/no-such-token/children", json={
            "type": "token", "data": "x"}, headers=seeded.headers), 404)
        await _status(await client.post("/tokens/p-1/children", json={
            "type": "card", "data": {"number": "4242424242424241"}},
            headers=seeded.headers), 400)
        await _status(await client.post("/tokens/p-1/children/p-1",
                                        headers=seeded.headers), 400)
        await _status(await client.delete("/tokens/p-1/children/c-1", headers=no_delete), 403)
        await _status(await client.delete("/tokens/p-1/children/c-1",
                                          headers=general_only), 404)
        await _status(await client.delete("/tokens/p-1/children/b-1",
                                          headers=seeded.headers), 404)


# ---- delete ----------------------------------------------------------------------------------

async def test_refused_deletes_change_nothing(client, tenant, admin_headers, seeded):
    no_delete = await _app(client, admin_headers, READ_ALL)
    bank_deleter = await _app(client, admin_headers, READ_ALL,
                              rule("/bank/", "reveal", permissions=["token:delete"]))
    async with Unchanged(client, tenant.tenant_id):
        await seeded.delete("c-1", headers=no_delete, expect=403)
        await seeded.delete("c-1", headers=bank_deleter, expect=404)  # outside its delete rules
        await seeded.delete("no-such-token", expect=404)


# ---- tokenize --------------------------------------------------------------------------------

async def test_tokenize_with_every_item_refused_changes_nothing(client, tenant, admin_headers,
                                                                seeded):
    bank_writer = await _app(client, admin_headers,
                             rule("/bank/", "reveal", permissions=["token:create", "token:read"]))
    items = [card(MASTERCARD),                                                  # outside: 403
             {"id": "c-1", "type": "bank", "data": {"routing_number": "021000021",
                                                    "account_number": "1234567"}},  # taken: 409
             {"type": "bank", "data": {"routing_number": "021000022",
                                       "account_number": "1"}}]                 # invalid: 400
    reader = await _app(client, admin_headers, READ_ALL)
    async with Unchanged(client, tenant.tenant_id):
        problem = await _status(await client.post("/tokenize", json=items,
                                                  headers=bank_writer), 403)
        assert {key.split(".")[0] for key in problem["errors"]} == {"0", "1", "2"}, problem
        await _status(await client.post("/tokenize", json=[], headers=bank_writer), 400)
        await _status(await client.post("/tokenize", json=items[:1], headers=reader), 403)


async def test_tokenize_writes_only_its_accepted_item(client, tenant, admin_headers, seeded):
    bank_writer = await _app(client, admin_headers,
                             rule("/bank/", "reveal", permissions=["token:create", "token:read"]))
    before = await tenant_snapshot(client, tenant.tenant_id)
    answer = await _status(await client.post("/tokenize", json={
        "card": card(MASTERCARD),
        "taken": {"id": "b-1", "type": "bank", "data": {"routing_number": "021000021",
                                                          "account_number": "1234567"}},
        "ok": {"id": "b-2", "type": "bank", "data": {"routing_number": "021000021",
                                                       "account_number": "1234567"},
               "metadata": {"m": "1"}},
    }, headers=bank_writer), 200)
    assert answer["card"]["status"] == 403 and answer["taken"]["status"] == 409, answer
    assert answer["ok"]["id"] == "b-2"
    diff = before.diff(await tenant_snapshot(client, tenant.tenant_id))
    assert set(diff) == {"added_nodes", "added_edges"}, diff
    [(labels, props)] = diff["added_nodes"].values()
    assert labels == ("Token",) and dict(props)["id"] == "b-2"
    assert [edge[0] for edge in diff["added_edges"].values()] == ["HAS_META"]
    assert VISA not in repr(diff) and MASTERCARD not in repr(diff)
