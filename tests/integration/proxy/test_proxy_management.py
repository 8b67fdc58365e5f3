"""Managing outbound proxies: create, list, read, patch, delete, per tenant; destinations
checked by the outbound address policy at creation and on every call."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from factories import new_tenant

from vaultgraph.app import create_app

from ._support import app_headers, create_proxy, start_destination

PATCH = "application/merge-patch+json"


@pytest.fixture
def settings(settings):
    return dataclasses.replace(settings, webhook_allow_http=True,
                               webhook_allowed_networks="127.0.0.1/32")


async def patch(client, headers, proxy_id: str, body: dict):
    return await client.patch(f"/proxies/{proxy_id}", data=orjson.dumps(body),
                              headers={**headers, "Content-Type": PATCH})


async def test_create_read_list_patch_delete(client, admin_headers, tenant):
    created = await create_proxy(client, admin_headers, "https://processor.example/v1",
                                 description="cards", header_allowlist=["Authorization", "X-A"])
    assert {k: created[k] for k in ("name", "destination_url", "description",
                                    "header_allowlist", "created_by")} == {
        "name": "processor", "destination_url": "https://processor.example/v1",
        "description": "cards", "header_allowlist": ["authorization", "x-a"],
        "created_by": tenant.application_id}
    assert created["created_at"] and "modified_at" not in created
    got = await client.get(f"/proxies/{created['id']}", headers=admin_headers)
    assert got.status == 200 and await got.json() == created

    second = await create_proxy(client, admin_headers, "https://other.example")
    first_page = await (await client.get("/proxies", params={"size": "1"},
                                         headers=admin_headers)).json()
    assert [p["id"] for p in first_page["data"]] == [created["id"]]
    rest = await (await client.get("/proxies", params={"size": "1", "start":
                                   first_page["pagination"]["next"]},
                                   headers=admin_headers)).json()
    assert [p["id"] for p in rest["data"]] == [second["id"]]
    assert rest["pagination"]["next"] is None

    resp = await patch(client, admin_headers, created["id"],
                       {"name": "renamed", "description": None, "header_allowlist": None})
    updated = await resp.json()
    assert resp.status == 200, updated
    assert (updated["name"], updated["description"], updated["header_allowlist"],
            updated["destination_url"]) == ("renamed", None, [], "https://processor.example/v1")
    assert updated["modified_at"]

    assert (await client.delete(f"/proxies/{created['id']}", headers=admin_headers)).status \
        == 204
    for call in (client.get(f"/proxies/{created['id']}", headers=admin_headers),
                 client.delete(f"/proxies/{created['id']}", headers=admin_headers),
                 patch(client, admin_headers, created["id"], {"name": "x"})):
        assert (await call).status == 404


async def test_another_tenants_proxy_is_a_404_like_an_unknown_one(client, admin_headers):
    theirs = await create_proxy(client, admin_headers, "https://processor.example")
    other = await new_tenant(client.server.app, "other")
    headers = {"SVC-API-KEY": other.key}
    answers = []
    for proxy_id in (theirs["id"], "8e1f5a5e-5a0e-4d1b-9b7e-0a7c1d2e3f40", "not-a-uuid"):
        for call in (client.get(f"/proxies/{proxy_id}", headers=headers),
                     patch(client, headers, proxy_id, {"name": "x"}),
                     client.delete(f"/proxies/{proxy_id}", headers=headers),
                     client.post(f"/proxy/{proxy_id}/x", headers=headers, json={})):
            resp = await call
            body = await resp.json()
            answers.append((resp.status, body["detail"]))
    assert set(answers) == {(404, "No proxy with this id.")}
    listed = await (await client.get("/proxies", headers=headers)).json()
    assert listed["data"] == []


@pytest.mark.parametrize("url", [
    "https://127.0.0.2/", "https://169.254.169.254/latest/meta-data", "https://[::1]:8443/",
    "https://[::ffff:10.0.0.1]/", "https://10.1.2.3/", "https://192.168.0.1/",
    "https://100.64.0.1/", "https://[fe80::1]/", "https://0.0.0.0/", "https://224.0.0.1/",
    "https://2130706434/", "https://127.2/", "ftp://processor.example/",
    "https://user:pw@processor.example/", "https://processor.example/?a=b", "not a url"])
async def test_a_refused_destination_is_a_400_naming_the_field(client, admin_headers, url):
    resp = await client.post("/proxies", json={"name": "p", "destination_url": url},
                             headers=admin_headers)
    body = await resp.json()
    assert resp.status == 400, body
    assert list(body["errors"]) == ["destination_url"]
    created = await create_proxy(client, admin_headers, "https://processor.example")
    resp = await patch(client, admin_headers, created["id"], {"destination_url": url})
    assert resp.status == 400
    assert list((await resp.json())["errors"]) == ["destination_url"]


@pytest.mark.parametrize(("body", "field"), [
    ({"destination_url": "https://a.example"}, "name"),
    ({"name": "", "destination_url": "https://a.example"}, "name"),
    ({"name": "  ", "destination_url": "https://a.example"}, "name"),
    ({"name": "p\r\nq", "destination_url": "https://a.example"}, "name"),
    ({"name": "p", "destination_url": "https://a.example", "extra": 1}, "extra"),
    ({"name": "p", "destination_url": "https://a.example", "header_allowlist": ["Cookie"]},
     "header_allowlist"),
    ({"name": "p", "destination_url": "https://a.example", "header_allowlist": ["SVC-API-KEY"]},
     "header_allowlist"),
    ({"name": "p", "destination_url": "https://a.example", "header_allowlist": ["bad name"]},
     "header_allowlist"),
    ({"name": "p", "destination_url": "https://a.example",
      "header_allowlist": [f"x-{i}" for i in range(21)]}, "header_allowlist")])
async def test_invalid_fields_are_named(client, admin_headers, body, field):
    resp = await client.post("/proxies", json=body, headers=admin_headers)
    assert resp.status == 400
    assert list((await resp.json())["errors"]) == [field]


async def test_management_takes_the_proxy_permissions(client, admin_headers):
    created = await create_proxy(client, admin_headers, "https://processor.example")
    user = await app_headers(client, admin_headers, permissions=["token:use"])
    assert (await client.get("/proxies", headers=user)).status == 403
    assert (await client.get(f"/proxies/{created['id']}", headers=user)).status == 403
    assert (await client.post("/proxies", headers=user, json={
        "name": "p", "destination_url": "https://a.example"})).status == 403
    reader = await app_headers(client, admin_headers, permissions=["proxy:read"])
    assert (await client.get(f"/proxies/{created['id']}", headers=reader)).status == 200
    assert (await client.delete(f"/proxies/{created['id']}", headers=reader)).status == 403


async def test_a_host_name_resolving_to_a_refused_address_is_refused_at_call_time(
        aiohttp_client, aiohttp_server, settings):
    """`localhost` is a name: accepted at creation, refused on the call once resolved (no
    network is allowed here), and the destination receives nothing."""
    destination = await start_destination(aiohttp_server)
    port = destination.base.rsplit(":", 1)[1]
    strict = dataclasses.replace(settings, webhook_allowed_networks="")
    client = await aiohttp_client(create_app(strict, schema_applied=True))
    tenant = await new_tenant(client.server.app, "strict")
    headers = {"SVC-API-KEY": tenant.key}
    proxy = await create_proxy(client, headers, f"http://localhost:{port}")
    resp = await client.post(f"/proxy/{proxy['id']}/x", headers=headers, json={"a": 1})
    body = await resp.json()
    assert resp.status == 502
    assert body["detail"] == (f"Proxy {proxy['id']}: its destination is an address the vault "
                              "may not connect to.")
    resp = await client.post("/proxies", headers=headers, json={
        "name": "p", "destination_url": f"http://127.0.0.1:{port}"})
    assert resp.status == 400   # the literal, refused at once without the allowed network
    assert destination.requests == []
