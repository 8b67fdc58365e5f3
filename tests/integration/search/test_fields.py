"""Every field of the query language, boolean combinations and read-your-writes, against the
real Neo4j: each answer is the exact list of ids, newest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from graph._support import MASTERCARD, VISA, bank, card, customer, cypher, expire

from .conftest import found

LAST4 = ["{{ data.number | last4 }}"]


async def seed(api) -> dict:
    """cust-ada → card-visa, card-mc, bank-1; card-visa → note (a grandchild of cust-ada)."""
    tokens = {}
    for body in (
            customer(id="cust-ada", metadata={"Segment": "Retail"}),
            card(VISA, id="card-visa", metadata={"customer": "C-1", "Status": "Active"},
                 search_indexes=LAST4),
            card(MASTERCARD, id="card-mc", metadata={"customer": "C-1", "status": "closed"},
                 search_indexes=LAST4),
            bank(id="bank-1", metadata={"customer": "C-1"}),
            customer("note", id="note", containers=["/general/notes/"],
                     expires_at="2099-01-01")):
        tokens[body["id"]] = await api.create(body)
    for child in ("card-visa", "card-mc", "bank-1"):
        await api.link("cust-ada", child)
    await api.link("card-visa", "note")
    return tokens


NEWEST_FIRST = ["note", "bank-1", "card-mc", "card-visa", "cust-ada"]


async def test_each_field_finds_exactly_its_tokens(api):
    tokens = await seed(api)
    fingerprint = tokens["card-mc"]["fingerprint"]
    cases = {
        "id:card-mc": ["card-mc"],
        'id:"bank-1"': ["bank-1"],
        "type:card": ["card-mc", "card-visa"],
        "type:bank": ["bank-1"],
        "type:card AND container:/pci/": ["card-mc", "card-visa"],
        "type:token AND container:/general/notes/": ["note"],
        "type:token AND container:/GENERAL/": ["note", "cust-ada"],
        f"fingerprint:{fingerprint}": ["card-mc"],
        "metadata.customer:c-1": ["bank-1", "card-mc", "card-visa"],
        "metadata.STATUS:ACTIVE": ["card-visa"],
        'metadata.segment:"retail"': ["cust-ada"],
        "metadata.customer:C-2": [],
        "data:4242": ["card-visa"],
        "data:4444": ["card-mc"],
        f"data:{VISA}": [],  # only what the search index expressions produced is indexed
        "parent:cust-ada": ["bank-1", "card-mc", "card-visa"],
        "parent:card-visa": ["note"],
        "child:note": ["card-visa"],
        "child:card-mc": ["cust-ada"],
        "ancestor:cust-ada": ["note", "bank-1", "card-mc", "card-visa"],
        "ancestor:card-visa": ["note"],
        "descendant:note": ["card-visa", "cust-ada"],
        "descendant:cust-ada": [],
        "expires_at:[2098-12-31 TO 2099-01-02]": ["note"],
        "expires_at:2099-01-01": ["note"],
        "expires_at:[* TO 2098-01-01]": [],
        "created_at:[* TO *]": NEWEST_FIRST,
    }
    for query, expected in cases.items():
        assert await found(api, query) == expected, query


async def test_created_at_ranges_cut_at_the_bounds(api):
    await seed(api)
    rows = await cypher(api.client, "MATCH (t:Token {id: 'card-mc'}) WHERE t.tenant_id = $t "
                                    "RETURN toString(t.created_at) AS at",
                        t=(await api.get("card-mc"))["tenant_id"])
    at = rows[0]["at"]
    assert set(await found(api, f'created_at:[* TO "{at}"]')) == {"card-mc", "card-visa",
                                                                  "cust-ada"}
    assert set(await found(api, f'created_at:{{* TO "{at}"}}')) == {"card-visa", "cust-ada"}
    assert await found(api, f'created_at:{{"{at}" TO *]') == ["note", "bank-1"]
    today = datetime.now(UTC).date()
    assert await found(api, f"created_at:{today.isoformat()}") == NEWEST_FIRST
    assert await found(api, f"created_at:{(today - timedelta(days=2)).isoformat()}") == []


async def test_boolean_combinations(api):
    await seed(api)
    cases = {
        "type:card AND metadata.status:active": ["card-visa"],
        "type:card metadata.status:closed": ["card-mc"],  # side by side: AND
        "type:bank OR data:4444": ["bank-1", "card-mc"],
        "id:cust-ada OR id:note OR id:nope": ["note", "cust-ada"],
        "parent:cust-ada AND NOT type:bank": ["card-mc", "card-visa"],
        "ancestor:cust-ada AND NOT (type:card OR type:bank)": ["note"],
        "(type:card OR type:bank) AND metadata.customer:c-1 AND NOT data:4242":
            ["bank-1", "card-mc"],
        "type:card AND (metadata.status:active OR metadata.status:closed)":
            ["card-mc", "card-visa"],
        "type:card OR type:bank AND metadata.customer:nobody": ["card-mc", "card-visa"],
        "NOT NOT id:note": ["note"],
        "descendant:note AND child:note": ["card-visa"],
        "ancestor:cust-ada AND type:card": ["card-mc", "card-visa"],  # cards under a customer
        "type:token AND NOT expires_at:[* TO *]": ["cust-ada"],
    }
    for query, expected in cases.items():
        assert await found(api, query) == expected, query


async def test_read_your_writes(api):
    await api.create(card(VISA, id="tok-1", metadata={"k": "v"}, search_indexes=LAST4))
    assert await found(api, "metadata.k:v") == ["tok-1"]
    assert await found(api, "data:4242") == ["tok-1"]
    resp = await api.client.patch(
        "/tokens/tok-1", headers={**api.headers, "Content-Type": "application/merge-patch+json"},
        json={"data": {"number": MASTERCARD}, "metadata": {"k": "w"}})
    assert resp.status == 200, await resp.text()
    assert await found(api, "metadata.k:v") == []
    assert await found(api, "metadata.k:w") == ["tok-1"]
    assert await found(api, "data:4242") == []
    assert await found(api, "data:4444") == ["tok-1"]
    await api.create(customer(id="par-1"))
    await api.link("par-1", "tok-1")
    assert await found(api, "parent:par-1") == ["tok-1"]
    await api.unlink("par-1", "tok-1")
    assert await found(api, "parent:par-1") == []
    await api.delete("tok-1")
    assert await found(api, "metadata.k:w") == []
    assert await found(api, "data:4444") == []
    assert await found(api, "id:tok-1") == []


async def test_expired_tokens_are_not_found_nor_walked_through(api):
    tokens = await seed(api)
    tenant_id = tokens["cust-ada"]["tenant_id"]
    await expire(api.client, tenant_id, "card-visa")
    assert await found(api, "type:card") == ["card-mc"]
    assert await found(api, "ancestor:cust-ada") == ["bank-1", "card-mc"]  # note: via card-visa
    assert await found(api, "descendant:note") == []
    assert await found(api, "parent:card-visa") == []


async def test_the_blind_index_holds_no_plaintext(api):
    created = await api.create(card(VISA, id="tok-1", search_indexes=LAST4))
    rows = await cypher(api.client,
                        "MATCH (t:Token {tenant_id: $t, id: 'tok-1'})-[x:HAS_INDEX]->(t) "
                        "RETURN x.digest AS digest, x.token_id AS token_id",
                        t=created["tenant_id"])
    assert len(rows) == 1 and rows[0]["token_id"] == "tok-1"
    assert "4242" not in rows[0]["digest"] and len(rows[0]["digest"]) == 43


async def test_an_index_over_a_field_the_data_lacks_indexes_nothing(api):
    # An optional field: the token is created (not a 400), found by its other index, and an
    # update that removes the field is accepted and leaves only the other index.
    indexes = ["{{ data.phone | last4 }}", "{{ data.name }}"]
    await api.create({"type": "token", "id": "no-phone", "data": {"name": "Ada"},
                      "search_indexes": indexes})
    await api.create({"type": "token", "id": "phone", "search_indexes": indexes,
                      "data": {"name": "Bob", "phone": "555-0100"}})
    assert await found(api, "data:Ada") == ["no-phone"]
    assert await found(api, "data:0100") == ["phone"]
    resp = await api.client.patch("/tokens/phone", data=b'{"data": {"phone": null}}', headers={
        **api.headers, "Content-Type": "application/merge-patch+json"})
    assert resp.status == 200, await resp.text()
    assert await found(api, "data:0100") == []
    assert await found(api, "data:Bob") == ["phone"]
