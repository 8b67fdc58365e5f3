"""Encryption at rest (docs/security.md): no plaintext token data anywhere in Neo4j, and ciphertext
that was moved or altered is refused cleanly on every read."""

from __future__ import annotations

import secrets

import pytest
from factories import audit_tenant

from ._support import PROBLEM_JSON, cypher, rule

INTERNALS = ("Traceback", "InvalidTag", "CryptoError", "cryptography", "data_ct", "AESGCM",
             "neo4j", "Exception")


def random_digits(n: int) -> str:
    return "".join(secrets.choice("0123456789") for _ in range(n))


def luhn_number(length: int = 16, prefix: str = "4") -> str:
    """A fresh Luhn-valid card number, so nothing else in the database can hold it."""
    body = prefix + random_digits(length - len(prefix) - 1)
    for check in "0123456789":
        digits = [int(d) for d in body + check]
        total = sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2)
                    for i, d in enumerate(reversed(digits)))
        if total % 10 == 0:
            return body + check
    raise AssertionError("unreachable")


def routing_number() -> str:
    while True:
        d = [int(x) for x in random_digits(8)]
        for last in range(10):
            n = [*d, last]
            if (3 * (n[0] + n[3] + n[6]) + 7 * (n[1] + n[4] + n[7]) + n[2] + n[5] + n[8]) % 10 == 0:
                return "".join(map(str, n))


def ssn() -> str:
    return f"{secrets.choice('12345678')}{random_digits(2)}-{secrets.choice('123456789')}" \
           f"{random_digits(1)}-{secrets.choice('123456789')}{random_digits(3)}"


# Every property value of every node (or relationship) of the whole database, list items one by
# one, searched inside Neo4j: shipping every node to the test would take far longer.
_SCAN = """
MATCH {pattern}
UNWIND keys(n) AS k
WITH n[k] AS v
UNWIND CASE WHEN valueType(v) STARTS WITH 'LIST' THEN v ELSE [v] END AS item
WITH toString(item) AS text
UNWIND $needles AS needle
WITH needle WHERE text CONTAINS needle
RETURN DISTINCT needle
"""


async def found_anywhere(client, needles: list[str]) -> set[str]:
    """Which of `needles` occur in any property of any node or relationship."""
    found: set[str] = set()
    for pattern in ("(n)", "()-[n]->()"):
        rows = await cypher(client, _SCAN.format(pattern=pattern), needles=needles)
        found |= {row["needle"] for row in rows}
    return found


async def dump_tenant(client, tenant_id: str) -> str:
    """Every property of the tenant's nodes and relationships, as one text."""
    nodes = await cypher(client, "MATCH (n) WHERE n.tenant_id = $t "
                                 "OR (n.tenant_key = $tk AND n.tenant_rest = $tr) "  # audit events
                                 "RETURN labels(n) AS l, properties(n) AS p", t=tenant_id,
                         **audit_tenant(tenant_id))
    rels = await cypher(client, "MATCH (n {tenant_id: $t})-[r]-() "
                                "RETURN type(r) AS t, properties(r) AS p", t=tenant_id)
    return repr(nodes) + repr(rels)


async def test_no_plaintext_anywhere_in_the_graph(api, client, tenant):
    cards = [luhn_number(16), luhn_number(15, "37"), luhn_number(19, "6")]
    routing, account, social = routing_number(), random_digits(14), ssn()
    note = "plaintext-needle-" + secrets.token_hex(8)
    await api.create({"type": "card", "data": {"number": cards[0], "expiration_month": 7,
                                               "expiration_year": 2031, "cvc": "4817"},
                      "search_indexes": ["{{ data.number }}", "{{ data.number | card_bin }}"],
                      "deduplicate_token": True})
    await api.create({"type": "card_number", "data": cards[1],
                      "mask": "{{ data | reveal_last: 4 }}"})
    await api.create({"type": "token", "data": {"card": cards[2], "note": note},
                      "fingerprint_expression": "{{ data.card }}"})
    await api.create({"type": "bank", "data": {"routing_number": routing,
                                               "account_number": account}})
    await api.create({"type": "us_bank_account_number", "data": account})
    await api.create({"type": "social_security_number", "data": social,
                      "search_indexes": ["{{ data }}"], "deduplicate_token": True})
    # Updates and dedup hits write too.
    patched = await api.create({"type": "token", "data": {"x": 1}})
    await api.patch(patched["id"], {"data": {"card": cards[0]}})
    await api.create({"type": "social_security_number", "data": social,
                      "deduplicate_token": True}, expect=200)

    plaintexts = [*cards, routing, account, social, social.replace("-", ""), note]
    # The search works: it finds values that are stored in the clear on purpose.
    assert await found_anywhere(client, [tenant.tenant_id, patched["id"]]) == {
        tenant.tenant_id, patched["id"]}
    assert await found_anywhere(client, plaintexts) == set(), "plaintext found in Neo4j"
    dumped = await dump_tenant(client, tenant.tenant_id)
    assert patched["id"] in dumped and "data_ct" in dumped
    assert not [value for value in plaintexts if value in dumped]


async def test_token_nodes_hold_ciphertext_not_data(api, client, tenant):
    created = await api.create({"type": "token", "data": "same", "mask": "{{ data }}"})
    twin = await api.create({"type": "token", "data": "same", "mask": "{{ data }}"})
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t}) RETURN properties(t) AS p "
                                "ORDER BY t.id", t=tenant.tenant_id)
    props = {row["p"]["id"]: row["p"] for row in rows}
    for token in (created, twin):
        stored = props[token["id"]]
        assert "data" not in stored and "mask" not in stored
        assert stored["data_ct"].startswith("v1.")
        assert stored["mask_ct"].startswith("v1.")
    # A fresh nonce per encryption: equal data, different ciphertext.
    assert props[created["id"]]["data_ct"] != props[twin["id"]]["data_ct"]


async def swap_ciphertexts(client, tenant_id: str, a: str, b: str) -> None:
    await cypher(client, "MATCH (a:Token {tenant_id: $t, id: $a}), (b:Token {tenant_id: $t, "
                         "id: $b}) WITH a, b, a.data_ct AS ca, b.data_ct AS cb "
                         "SET a.data_ct = cb, b.data_ct = ca", t=tenant_id, a=a, b=b)


async def assert_fails_cleanly(resp, *plaintexts: str) -> None:
    text = await resp.text()
    assert resp.status == 500, (resp.status, text)
    assert resp.content_type == PROBLEM_JSON
    body = await resp.json(content_type=None)
    assert body["status"] == 500 and set(body) == {"type", "title", "status", "detail",
                                                   "trace_id"}
    assert body["trace_id"] == resp.headers["SVC-TRACE-ID"]
    for value in plaintexts:
        assert value not in text
    for word in INTERNALS:
        assert word not in text


async def test_swapped_ciphertexts_fail_cleanly_on_every_read(api, client, tenant, masking):
    a_number, b_number = luhn_number(), luhn_number()
    a = await api.create({"type": "card_number", "data": a_number})
    b = await api.create({"type": "card_number", "data": b_number})
    await swap_ciphertexts(client, tenant.tenant_id, a["id"], b["id"])
    for headers in (api.headers, masking):
        for token in (a, b):
            resp = await client.get(f"/tokens/{token['id']}", headers=headers)
            await assert_fails_cleanly(resp, a_number, b_number)
        resp = await client.get("/tokens", headers=headers)
        await assert_fails_cleanly(resp, a_number, b_number)
    resp = await client.patch(f"/tokens/{a['id']}", data=b'{"metadata": {"k": "v"}}',
                              headers={**api.headers,
                                       "Content-Type": "application/merge-patch+json"})
    await assert_fails_cleanly(resp, a_number, b_number)


async def test_ciphertext_from_another_tenant_fails_cleanly(api, client, tenant,
                                                           other_tenant_api):
    number = luhn_number()
    ours = await api.create({"type": "card_number", "data": luhn_number()})
    theirs = await other_tenant_api.create({"id": ours["id"], "type": "card_number",
                                            "data": number})
    await cypher(client, "MATCH (a:Token {tenant_id: $t, id: $id}), "
                         "(b:Token {tenant_id: $o, id: $id}) SET a.data_ct = b.data_ct",
                 t=tenant.tenant_id, o=theirs["tenant_id"], id=ours["id"])
    resp = await client.get(f"/tokens/{ours['id']}", headers=api.headers)
    await assert_fails_cleanly(resp, number)


@pytest.mark.parametrize("mangle", ["flip", "truncate", "garbage", "version"])
async def test_altered_ciphertext_fails_cleanly(api, client, tenant, mangle):
    number = luhn_number()
    token = await api.create({"type": "card_number", "data": number})
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) RETURN t.data_ct AS c",
                        t=tenant.tenant_id, id=token["id"])
    blob = rows[0]["c"]
    altered = {
        "flip": blob[:-5] + ("A" if blob[-5] != "A" else "B") + blob[-4:],
        "truncate": blob[:20],
        "garbage": "not a ciphertext",
        "version": blob.replace("v1.", "v9.", 1),
    }[mangle]
    await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) SET t.data_ct = $c",
                 t=tenant.tenant_id, id=token["id"], c=altered)
    resp = await client.get(f"/tokens/{token['id']}", headers=api.headers)
    await assert_fails_cleanly(resp, number)


async def test_swapped_masks_fail_cleanly(api, client, tenant, masking):
    a = await api.create({"type": "token", "data": "aaaa-1111", "mask": "{{ data | last4 }}"})
    b = await api.create({"type": "token", "data": "bbbb-2222", "mask": "{{ data }}"})
    await cypher(client, "MATCH (a:Token {tenant_id: $t, id: $a}), (b:Token {tenant_id: $t, "
                         "id: $b}) WITH a, b, a.mask_ct AS ma, b.mask_ct AS mb "
                         "SET a.mask_ct = mb, b.mask_ct = ma",
                 t=tenant.tenant_id, a=a["id"], b=b["id"])
    resp = await client.get(f"/tokens/{a['id']}", headers=masking)
    await assert_fails_cleanly(resp, "aaaa-1111", "bbbb-2222")


async def test_redacting_reader_never_needs_the_plaintext(api, client, tenant, app_headers):
    a = await api.create({"type": "card_number", "data": luhn_number()})
    b = await api.create({"type": "card_number", "data": luhn_number()})
    await swap_ciphertexts(client, tenant.tenant_id, a["id"], b["id"])
    redacting = await app_headers(rule("/", "redact", ["token:read"]),
                                  permissions=["token:read"])
    got = await api.get(a["id"], headers=redacting)
    assert "data" not in got
