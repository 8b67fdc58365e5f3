"""Delete Token (DELETE /tokens/{id}): 204, data gone for good, an audit reference stays
(docs/tokens-and-expressions.md, "Deletion")."""

from __future__ import annotations

from datetime import datetime

from factories import audit_tenant

from ._support import SSN, VISA, card, cypher, rule

AUDIT_FIELDS = {"tenant_id", "id", "type", "created_by", "created_at", "deleted_at",
                "deleted_by", "deleted_reason"}


async def test_delete_answers_204_without_body(api):
    created = await api.create({"type": "token", "data": 1})
    assert await api.delete(created["id"]) is None


async def test_deleted_token_is_gone_from_get_and_lists(api):
    created = await api.create({"type": "token", "data": 1, "metadata": {"k": "v"}})
    await api.delete(created["id"])
    await api.get(created["id"], expect=404)
    assert await api.ids() == []
    assert await api.ids([("id", created["id"])]) == []
    assert await api.ids([("type", "token")]) == []
    assert await api.ids([("metadata.k", "v")]) == []


async def test_deleted_token_cannot_be_updated_or_deleted_again(api):
    created = await api.create({"type": "token", "data": 1})
    await api.delete(created["id"])
    unknown = await api.delete("no-such-token", expect=404)
    assert await api.delete(created["id"], expect=404) == unknown
    await api.patch(created["id"], {"data": 2}, expect=404)


async def test_data_is_removed_and_an_audit_reference_remains(api, client, tenant):
    created = await api.create({**card(VISA, cvc="123"), "metadata": {"customer": "c-9"},
                                "search_indexes": ["{{ data.number | last4 }}"],
                                "mask": "{{ data.number | last4 }}"})
    await api.delete(created["id"])
    rows = await cypher(client, "MATCH (d {tenant_id: $t, id: $id}) "
                                "RETURN labels(d) AS labels, properties(d) AS p, "
                                "COUNT { (d)--() } AS edges",
                        t=tenant.tenant_id, id=created["id"])
    assert len(rows) == 1
    [row] = rows
    assert row["labels"] == ["DeletedToken"]
    assert row["edges"] == 0
    audit = row["p"]
    assert set(audit) == AUDIT_FIELDS  # nothing of data, mask, metadata, fingerprint, indexes
    assert audit["deleted_reason"] == "deleted"
    assert audit["deleted_by"] == tenant.application_id
    assert audit["type"] == "card"
    assert audit["created_by"] == created["created_by"]
    assert audit["deleted_at"].to_native() >= datetime.fromisoformat(created["created_at"])


async def test_no_metadata_of_a_deleted_token_remains_in_the_graph(api, client, tenant):
    created = await api.create({"type": "token", "data": 1,
                                "metadata": {"Distinctive-Key": "distinctive value 71"}})
    await api.delete(created["id"])
    nodes = await cypher(client, "MATCH (n) WHERE n.tenant_id = $t "
                                 "OR (n.tenant_key = $tk AND n.tenant_rest = $tr) "  # audit events
                                 "RETURN properties(n) AS p",
                         t=tenant.tenant_id, **audit_tenant(tenant.tenant_id))
    rels = await cypher(client, "MATCH ()-[r]->() WHERE r.tenant_id = $t "
                                "RETURN properties(r) AS p", t=tenant.tenant_id)
    assert nodes
    dumped = str([row["p"] for row in nodes + rels]).lower()
    assert "distinctive" not in dumped


async def test_links_of_a_deleted_token_are_removed(api, client, tenant):
    parent = await api.create({"type": "token", "data": "p"})
    child = await api.create({"type": "token", "data": "c"})
    await cypher(client, "MATCH (p:Token {tenant_id: $t, id: $p}), (c:Token {tenant_id: $t, "
                         "id: $c}) CREATE (p)-[:PARENT_OF {created_at: datetime()}]->(c)",
                 t=tenant.tenant_id, p=parent["id"], c=child["id"])
    await api.delete(child["id"])
    rows = await cypher(client, "MATCH (p:Token {tenant_id: $t, id: $p}) "
                                "RETURN COUNT { (p)--() } AS edges",
                        t=tenant.tenant_id, p=parent["id"])
    assert rows == [{"edges": 0}]
    assert (await api.get(parent["id"]))["data"] == "p"


async def test_id_may_be_reused_after_delete(api, client, tenant):
    await api.create({"id": "reused", "type": "social_security_number", "data": SSN})
    await api.delete("reused")
    again = await api.create({"id": "reused", "type": "token", "data": "new"})
    assert again["type"] == "token"
    assert (await api.get("reused"))["data"] == "new"
    rows = await cypher(client, "MATCH (n {tenant_id: $t, id: 'reused'}) "
                                "RETURN labels(n) AS labels ORDER BY labels",
                        t=tenant.tenant_id)
    assert rows == [{"labels": ["DeletedToken"]}, {"labels": ["Token"]}]


async def test_delete_without_token_delete_is_403(api, app_headers):
    reader = await app_headers(rule("/", "reveal", ["token:read"]), permissions=["token:read"])
    created = await api.create({"type": "token", "data": 1})
    await api.delete(created["id"], headers=reader, expect=403)
    await api.get(created["id"])


async def test_token_outside_the_callers_delete_rules_is_404(api, app_headers):
    pci = await app_headers(rule("/pci/", "reveal", ["token:read", "token:delete"]))
    created = await api.create({"type": "token", "data": 1})
    await api.delete(created["id"], headers=pci, expect=404)
    await api.get(created["id"])


async def test_another_tenants_token_is_404(api, other_tenant_api):
    theirs = await other_tenant_api.create({"type": "token", "data": 1})
    await api.delete(theirs["id"], expect=404)
    await other_tenant_api.get(theirs["id"])
