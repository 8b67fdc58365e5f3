"""A webhook create or secret rotation retried under its `Idempotency-Key` is answered with the
first answer, secret included (docs/webhooks.md): a client whose first answer was lost still
gets the secret. The kept answer is encrypted under the tenant's key, like the secret itself:
the secret is stored in the clear nowhere."""

from __future__ import annotations

from factories import database

from .conftest import make_webhook

KEY = "Idempotency-Key"
BODY = {"url": "https://hooks.example.com/in", "events": ["*"]}


async def stored_anywhere(client, text: str) -> list[str]:
    """Every node and relationship of the database whose properties hold `text`."""
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(
        "MATCH (n) RETURN labels(n) AS what, properties(n) AS p "
        "UNION ALL MATCH ()-[r]->() RETURN [type(r)] AS what, properties(r) AS p",
        database_=db.database)
    return [repr(r["what"]) for r in records if text in repr(r["p"])]


async def kept_entry(client, tenant_id: str, key: str) -> dict:
    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(
        "MATCH (k:IdempotencyKey {key: $key, tenant_id: $tenant_id}) RETURN properties(k) AS k",
        {"key": key, "tenant_id": tenant_id}, database_=db.database)
    assert len(records) == 1
    return dict(records[0]["k"])


async def assert_kept_encrypted(client, tenant_id: str, key: str, secret: str) -> None:
    entry = await kept_entry(client, tenant_id, key)
    assert entry["state"] == "done" and entry["response_ct"].startswith("v1.")
    for text in (secret, secret.removeprefix("whsec_")):
        assert await stored_anywhere(client, text) == []


async def test_a_replayed_create_shows_the_same_secret(client, tenant, admin_headers):
    headers = {**admin_headers, KEY: "hook-create-1"}
    first = await client.post("/webhooks", json=BODY, headers=headers)
    created = await first.json()
    assert first.status == 201 and created["secret"].startswith("whsec_")
    again = await client.post("/webhooks", json=BODY, headers=headers)
    assert again.status == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert await again.json() == created  # the secret included
    listed = await (await client.get("/webhooks", headers=admin_headers)).json()
    assert [w["id"] for w in listed["data"]] == [created["id"]]  # not created twice
    await assert_kept_encrypted(client, tenant.tenant_id, "hook-create-1", created["secret"])


async def test_a_replayed_rotation_shows_the_same_secret(client, tenant, admin_headers):
    hook = await make_webhook(client, admin_headers)
    db = database(client.server.app)

    async def stored_secrets() -> dict:
        records, _, _ = await db.driver.execute_query(
            "MATCH (w:Webhook {id: $id}) RETURN w.secret_ct AS now, "
            "w.previous_secret_ct AS before", {"id": hook["id"]}, database_=db.database)
        return records[0].data()

    original = (await stored_secrets())["now"]
    headers = {**admin_headers, KEY: "hook-rotate-1"}
    path = f"/webhooks/{hook['id']}/secret"
    first = await client.post(path, headers=headers)
    rotated = await first.json()
    assert first.status == 201 and rotated["secret"] != hook["secret"]
    again = await client.post(path, headers=headers)
    assert again.status == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert await again.json() == rotated  # the secret and its overlap's end
    # Rotated once: the secret it replaced is the webhook's first one, not the replay's.
    assert (await stored_secrets())["before"] == original
    await assert_kept_encrypted(client, tenant.tenant_id, "hook-rotate-1", rotated["secret"])
