"""Who finds what: transforms, container rules, tenancy and the graph terms' anchors. A token
outside the caller's `token:search` rules is neither returned nor counted, and nothing is found
through it."""

from __future__ import annotations

from graph._support import VISA, card, customer

from .conftest import ALL_TOKEN, found, rule, search

SEARCH = ["token:search"]


async def seed(api):
    await api.create(customer(id="cust-ada", containers=["/general/"]))
    await api.create(card(VISA, id="card-pci", metadata={"k": "v"},
                          search_indexes=["{{ data.number | last4 }}"]))
    await api.create(customer("x", id="secret-1", containers=["/secret/"], metadata={"k": "v"}))
    await api.create(customer("y", id="under-secret", containers=["/general/"]))
    await api.link("cust-ada", "card-pci")
    await api.link("cust-ada", "secret-1")
    await api.link("secret-1", "under-secret")


async def test_each_token_is_shown_under_the_transform_of_its_search_rule(api, caller):
    await seed(api)
    app = await caller(rule("/pci/", "mask", SEARCH), rule("/general/", "redact", SEARCH),
                       rule("/secret/", "reveal", SEARCH), permissions=ALL_TOKEN)
    page = await search(app, "metadata.k:v OR id:cust-ada")
    shown = {t["id"]: t for t in page["data"]}
    assert [t["id"] for t in page["data"]] == ["secret-1", "card-pci", "cust-ada"]
    assert shown["secret-1"]["data"] == {"name": "x"}
    assert shown["card-pci"]["data"] == {"number": "424242XXXXXX4242", "expiration_month": 12,
                                         "expiration_year": 2030}
    assert "fingerprint" not in shown["card-pci"]
    assert "data" not in shown["cust-ada"] and "mask" not in shown["cust-ada"]
    # The same tokens as the token list would show them under the same transforms.
    reader = await caller(rule("/pci/", "mask", ["token:read"]), permissions=ALL_TOKEN)
    listed = (await reader.client.get("/tokens", params={"id": "card-pci"},
                                      headers=reader.headers))
    assert (await listed.json())["data"] == [shown["card-pci"]]


async def test_tokens_outside_the_rules_are_not_found_nor_counted(api, caller):
    await seed(api)
    app = await caller(rule("/pci/", "reveal", SEARCH), rule("/general/", "mask", SEARCH),
                       permissions=ALL_TOKEN)
    assert await found(app, "metadata.k:v") == ["card-pci"]
    assert await found(app, "id:secret-1") == []
    # A page of one is not cut short by the invisible match, and says nothing follows.
    page = await search(app, "metadata.k:v", size=1)
    assert [t["id"] for t in page["data"]] == ["card-pci"]
    assert page["pagination"]["next"] is None


async def test_nothing_is_found_through_an_invisible_token(api, caller):
    await seed(api)
    app = await caller(rule("/pci/", "reveal", SEARCH), rule("/general/", "mask", SEARCH),
                       permissions=ALL_TOKEN)
    assert await found(api, "ancestor:cust-ada") == ["under-secret", "secret-1", "card-pci"]
    assert await found(app, "ancestor:cust-ada") == ["card-pci"]
    assert await found(app, "parent:secret-1") == []      # the anchor is invisible
    assert await found(app, "child:secret-1") == []
    assert await found(app, "descendant:under-secret") == []  # the way up crosses secret-1
    assert await found(app, "descendant:card-pci") == ["cust-ada"]


async def test_reading_is_not_searching(api, caller):
    await seed(api)
    reader = await caller(rule("/", "reveal", ["token:read"]), permissions=["token:read"])
    await search(reader, "id:card-pci", 403)
    # search on /pci/ only: the /general/ tokens are invisible even though read is granted there.
    app = await caller(rule("/pci/", "reveal", SEARCH), rule("/", "reveal", ["token:read"]),
                       permissions=ALL_TOKEN)
    assert await found(app, "id:card-pci OR id:cust-ada") == ["card-pci"]


async def test_another_tenant_finds_nothing(api, other_tenant):
    await seed(api)
    await other_tenant.create(customer(id="cust-ada", metadata={"k": "v"}))
    assert await found(other_tenant, "metadata.k:v") == ["cust-ada"]
    assert await found(other_tenant, "id:card-pci OR type:card OR data:4242") == []
    assert await found(other_tenant, "parent:cust-ada") == []
    ours = await search(api, "id:cust-ada")
    theirs = await search(other_tenant, "id:cust-ada")
    assert ours["data"][0]["tenant_id"] != theirs["data"][0]["tenant_id"]


async def test_the_blind_index_is_per_tenant(api, other_tenant):
    await api.create(card(VISA, id="card-pci", search_indexes=["{{ data.number | last4 }}"]))
    await other_tenant.create(card(VISA, id="card-pci",
                                   search_indexes=["{{ data.number | last4 }}"]))
    tenant_ids = {(await search(t, "data:4242"))["data"][0]["tenant_id"]
                  for t in (api, other_tenant)}
    assert len(tenant_ids) == 2
