"""Applications, API keys and access rules: the management API and the CLI (issue #3).

Who may call which route (401/403/404 per route, the permission matrix) is in test_auth.py.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import sys
import uuid
from datetime import datetime

import orjson
import pytest
from factories import (
    audit_tenant,
    blocked_behind,
    database,
    key_headers,
    make_application,
    new_tenant,
)

from vaultgraph.auth import apikeys

PCI_MASK = {"description": "support sees cards masked", "priority": 0, "container": "/pci/",
            "transform": "mask", "permissions": ["token:read"]}
APPLICATION_FIELDS = {"id", "tenant_id", "name", "permissions", "rules", "created_at",
                      "created_by"}
# One trace id for calls whose answers are compared (problem bodies carry it).
COMPARE = "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"


@pytest.fixture
async def other_tenant(client):
    app = client.server.app
    return await new_tenant(app, "other")


def _iso(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    assert parsed.tzinfo is not None
    return parsed


# ---- create --------------------------------------------------------------------------------

async def test_create_returns_the_application_and_its_key_once(client, tenant, admin_headers):
    created = await make_application(client, admin_headers, name="support",
                                     permissions=["token:read"], rules=[PCI_MASK])
    assert set(created) == APPLICATION_FIELDS | {"key"}
    assert str(uuid.UUID(created["id"])) == created["id"]
    assert created["tenant_id"] == tenant.tenant_id
    assert created["name"] == "support"
    assert created["permissions"] == ["token:read"]
    assert created["rules"] == [PCI_MASK]
    assert created["created_by"] == tenant.application_id
    _iso(created["created_at"])
    assert apikeys.well_formed(created["key"])

    fetched = await client.get(f"/applications/{created['id']}", headers=admin_headers)
    assert fetched.status == 200
    body = await fetched.json()
    assert body == {k: v for k, v in created.items() if k != "key"}


async def test_keys_are_256_bit_random_with_the_vg_prefix(client, admin_headers):
    a = await make_application(client, admin_headers)
    b = await make_application(client, admin_headers)
    for key in (a["key"], b["key"]):
        assert key.startswith("vg_")
        assert len(base64.urlsafe_b64decode(key[3:] + "=")) == 32
    assert a["key"] != b["key"]


async def test_the_new_key_authenticates_as_the_new_application(client, admin_headers):
    created = await make_application(client, admin_headers, permissions=[])
    resp = await client.get("/applications/self", headers=key_headers(created))
    assert resp.status == 200
    body = await resp.json()
    assert body["id"] == created["id"]
    assert "key" not in body
    assert set(body) == APPLICATION_FIELDS | {"key_id"}


async def test_permissions_are_deduplicated_and_sorted(client, admin_headers):
    created = await make_application(
        client, admin_headers, permissions=["token:read", "application:read", "token:read"])
    assert created["permissions"] == ["application:read", "token:read"]


async def test_rule_containers_are_stored_lower_case_and_defaults_filled(client, admin_headers):
    created = await make_application(client, admin_headers, rules=[
        {"container": "/PCI/High/", "transform": "reveal", "permissions": ["token:read"]}])
    assert created["rules"] == [{"description": "", "priority": 0, "container": "/pci/high/",
                                 "transform": "reveal", "permissions": ["token:read"]}]


def _rule(**changes):
    return {**PCI_MASK, **changes}


INVALID_BODIES = [
    ({}, "name"),
    ({"name": ""}, "name"),
    ({"name": "   "}, "name"),
    ({"name": "support\nadmin"}, "name"),
    ({"name": "support\x1b[2K"}, "name"),
    ({"name": "x" * 201}, "name"),
    ({"name": 7}, "name"),
    ({"name": "a", "permissions": ["token:fly"]}, "permissions.0"),
    ({"name": "a", "permissions": "token:read"}, "permissions"),
    ({"name": "a", "color": "red"}, "color"),
    ({"name": "a", "rules": [_rule(container="pci/")]}, "rules.0.container"),
    ({"name": "a", "rules": [_rule(container="/pci")]}, "rules.0.container"),
    ({"name": "a", "rules": [_rule(container="/p ci/")]}, "rules.0.container"),
    ({"name": "a", "rules": [_rule(container="/pci//")]}, "rules.0.container"),
    ({"name": "a", "rules": [_rule(transform="show")]}, "rules.0.transform"),
    ({"name": "a", "rules": [_rule(permissions=["application:read"])]}, "rules.0.permissions.0"),
    ({"name": "a", "rules": [_rule(permissions=[])]}, "rules.0.permissions"),
    ({"name": "a", "rules": [_rule(priority=-1)]}, "rules.0.priority"),
    ({"name": "a", "rules": [_rule(priority=1.5)]}, "rules.0.priority"),
    ({"name": "a", "rules": [_rule(priority=True)]}, "rules.0.priority"),
    ({"name": "a", "rules": [_rule(priority="1")]}, "rules.0.priority"),
    ({"name": "a", "rules": [_rule(description="d" * 201)]}, "rules.0.description"),
    ({"name": "a", "rules": [_rule(extra=1)]}, "rules.0.extra"),
    ({"name": "a", "rules": [{"transform": "mask", "permissions": ["token:read"]}]},
     "rules.0.container"),
    ({"name": "a", "rules": [PCI_MASK] * 51}, "rules"),
]


@pytest.mark.parametrize(("body", "field"), INVALID_BODIES)
async def test_invalid_application_is_a_400_naming_the_field(client, admin_headers, body, field):
    resp = await client.post("/applications", json=body, headers=admin_headers)
    assert resp.status == 400
    assert resp.content_type == "application/problem+json"
    problem = await resp.json()
    assert field in problem["errors"], problem


async def test_a_name_may_hold_spaces_of_any_script_and_no_control_character(client,
                                                                             admin_headers):
    name = "caf\u00e9\u00a0ops\u3000\u652f\u6255"
    created = await make_application(client, admin_headers, name=name)
    assert created["name"] == name
    resp = await client.put(f"/applications/{created['id']}", json={"name": "ops\tteam"},
                            headers=admin_headers)
    assert resp.status == 400
    assert list((await resp.json())["errors"]) == ["name"]


async def test_fifty_rules_are_accepted(client, admin_headers):
    created = await make_application(client, admin_headers, rules=[PCI_MASK] * 50)
    assert len(created["rules"]) == 50


async def test_create_needs_a_json_body(client, admin_headers):
    resp = await client.post("/applications", data="name=a", headers=admin_headers)
    assert resp.status == 415
    resp = await client.post("/applications", data="{", headers={
        **admin_headers, "Content-Type": "application/json"})
    assert resp.status == 400
    resp = await client.post("/applications", json=["name"], headers=admin_headers)
    assert resp.status == 400


# ---- no privilege escalation ---------------------------------------------------------------

async def _forbidden_detail(resp) -> str:
    assert resp.status == 403, await resp.text()
    return (await resp.json())["detail"]


async def test_an_application_grants_only_permissions_it_holds(client, admin_headers):
    creator = await make_application(client, admin_headers,
                                     permissions=["application:create", "token:read"])
    resp = await client.post("/applications", headers=key_headers(creator),
                             json={"name": "x", "permissions": ["token:delete"]})
    assert "token:delete" in await _forbidden_detail(resp)
    resp = await client.post("/applications", headers=key_headers(creator),
                             json={"name": "x", "permissions": ["application:delete"]})
    assert "application:delete" in await _forbidden_detail(resp)
    resp = await client.post("/applications", headers=key_headers(creator),
                             json={"name": "x", "permissions": ["token:read",
                                                                "application:create"]})
    assert resp.status == 201


async def test_rules_must_sit_within_the_creators_rules(client, admin_headers):
    support = await make_application(client, admin_headers, permissions=["application:create"],
                                     rules=[PCI_MASK])
    headers = key_headers(support)

    async def create(rule: dict, permissions=()) -> int:
        resp = await client.post("/applications", headers=headers, json={
            "name": "x", "permissions": list(permissions), "rules": [rule]})
        return resp.status

    # Narrower container, same or weaker transform: within what the creator sees.
    assert await create(_rule(container="/pci/high/")) == 201
    assert await create(_rule(transform="redact")) == 201
    # More revealing, a wider container, or another operation: escalation.
    assert await create(_rule(transform="reveal")) == 403
    assert await create(_rule(container="/")) == 403
    assert await create(_rule(container="/bank/")) == 403
    assert await create(_rule(permissions=["token:read", "token:update"])) == 403


async def test_plain_token_permissions_imply_mask_on_root_which_a_narrow_creator_lacks(
        client, admin_headers):
    support = await make_application(client, admin_headers, permissions=["application:create"],
                                     rules=[PCI_MASK])
    resp = await client.post("/applications", headers=key_headers(support),
                             json={"name": "x", "permissions": ["token:read"]})
    assert "mask on '/'" in await _forbidden_detail(resp)


async def test_an_earlier_weaker_rule_of_the_creator_bounds_what_it_grants(client, admin_headers):
    # The creator sees tokens in /pci/ masked even when they are also in /bank/ (its first rule
    # decides), so it must not grant `reveal` on /bank/: that would reveal those cards.
    creator = await make_application(client, admin_headers, permissions=["application:create"],
                                     rules=[PCI_MASK, _rule(container="/", transform="reveal",
                                                            priority=1)])
    headers = key_headers(creator)
    resp = await client.post("/applications", headers=headers, json={
        "name": "x", "rules": [_rule(container="/bank/", transform="reveal")]})
    assert "rules[0]" in await _forbidden_detail(resp)
    resp = await client.post("/applications", headers=headers, json={
        "name": "x", "rules": [_rule(container="/bank/", transform="mask")]})
    assert resp.status == 201


async def test_replace_cannot_escalate_either(client, admin_headers):
    manager = await make_application(client, admin_headers,
                                     permissions=["application:update", "token:read"])
    target = await make_application(client, admin_headers, permissions=["token:read"])
    resp = await client.put(f"/applications/{target['id']}", headers=key_headers(manager),
                            json={"name": "t", "permissions": ["token:read", "token:delete"]})
    assert "token:delete" in await _forbidden_detail(resp)


async def test_an_application_cannot_manage_a_more_powerful_one(client, tenant, admin_headers):
    manager = await make_application(client, admin_headers, permissions=[
        "application:read", "application:update", "application:delete"])
    headers = key_headers(manager)
    admin = f"/applications/{tenant.application_id}"
    for resp in (
        await client.put(admin, headers=headers, json={"name": "pwned"}),
        await client.delete(admin, headers=headers),
        await client.post(f"{admin}/keys", headers=headers),
    ):
        assert await _forbidden_detail(resp) == (
            "The calling application cannot manage an application that holds access it does "
            "not hold itself.")
    admin_key_id = (await (await client.get("/applications/self", headers=admin_headers))
                    .json())["key_id"]
    resp = await client.delete(f"{admin}/keys/{admin_key_id}", headers=headers)
    assert resp.status == 403
    # Reading it is fine: no key material is ever in a read.
    assert (await client.get(admin, headers=headers)).status == 200
    assert (await client.get("/applications/self", headers=admin_headers)).status == 200


# ---- list ----------------------------------------------------------------------------------

async def test_list_pages_through_every_application_in_creation_order(client, tenant,
                                                                     admin_headers):
    created = [await make_application(client, admin_headers, name=f"app{i}") for i in range(5)]
    expected = [tenant.application_id] + [c["id"] for c in created]
    seen, url = [], "/applications?size=2"
    while True:
        resp = await client.get(url, headers=admin_headers)
        assert resp.status == 200
        body = await resp.json()
        assert body["pagination"]["page_size"] == 2
        assert len(body["data"]) <= 2
        seen += [a["id"] for a in body["data"]]
        if body["pagination"]["next"] is None:
            break
        url = "/applications?size=2&start=" + body["pagination"]["next"]
    assert seen == expected
    for app in (await (await client.get("/applications", headers=admin_headers)).json())["data"]:
        assert "key" not in app


async def test_list_default_page_size_and_an_exact_last_page(client, admin_headers):
    resp = await client.get("/applications", headers=admin_headers)
    body = await resp.json()
    assert body["pagination"] == {"page_size": 20, "next": None}
    assert len(body["data"]) == 1
    resp = await client.get("/applications?size=1", headers=admin_headers)
    assert (await resp.json())["pagination"]["next"] is None


@pytest.mark.parametrize("size", ["0", "101", "-1", "x", "1.5"])
async def test_list_refuses_a_bad_size(client, admin_headers, size):
    resp = await client.get(f"/applications?size={size}", headers=admin_headers)
    assert resp.status == 400
    assert "size" in (await resp.json())["errors"]


def _cursor(value) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()


@pytest.mark.parametrize("start", [
    "not-a-cursor!", "%%%", _cursor({"a": 1}), _cursor(["2024-01-01T00:00:00Z"]),
    _cursor(["yesterday", str(uuid.uuid4())]), _cursor(["2024-01-01T00:00:00Z", "abc"]),
    _cursor(["2024-13-01T00:00:00Z", str(uuid.uuid4())]), _cursor([1, 2]),
    _cursor(["2024-01-01T00:00:00", str(uuid.uuid4())]),
])
async def test_list_refuses_a_malformed_cursor_naming_start(client, admin_headers, start):
    resp = await client.get("/applications", params={"start": start}, headers=admin_headers)
    assert resp.status == 400
    assert resp.content_type == "application/problem+json"
    assert "start" in (await resp.json())["errors"]


async def test_list_leaves_out_deleted_applications(client, admin_headers):
    gone = await make_application(client, admin_headers, name="gone")
    kept = await make_application(client, admin_headers, name="kept")
    assert (await client.delete(f"/applications/{gone['id']}", headers=admin_headers)).status \
        == 204
    ids = [a["id"] for a in
           (await (await client.get("/applications", headers=admin_headers)).json())["data"]]
    assert kept["id"] in ids
    assert gone["id"] not in ids


# ---- replace -------------------------------------------------------------------------------

async def test_replace_changes_name_permissions_and_rules(client, admin_headers):
    created = await make_application(client, admin_headers, permissions=["token:read"])
    resp = await client.put(f"/applications/{created['id']}", headers=admin_headers, json={
        "name": "payments", "permissions": ["token:create"],
        "rules": [_rule(container="/pci/", transform="reveal")]})
    assert resp.status == 200
    body = await resp.json()
    assert body["name"] == "payments"
    assert body["permissions"] == ["token:create"]
    assert body["rules"][0]["transform"] == "reveal"
    assert _iso(body["modified_at"]) >= _iso(body["created_at"])
    assert body["created_at"] == created["created_at"]
    assert "key" not in body
    fetched = await (await client.get(f"/applications/{created['id']}",
                                      headers=admin_headers)).json()
    assert fetched == body


async def test_replace_omitting_lists_empties_them(client, admin_headers):
    created = await make_application(client, admin_headers, rules=[PCI_MASK])
    resp = await client.put(f"/applications/{created['id']}", headers=admin_headers,
                            json={"name": "bare"})
    body = await resp.json()
    assert (body["permissions"], body["rules"]) == ([], [])


async def test_replace_narrowing_access_holds_at_once(client, admin_headers):
    created = await make_application(client, admin_headers, permissions=["application:read"])
    headers = key_headers(created)
    assert (await client.get("/applications", headers=headers)).status == 200
    resp = await client.put(f"/applications/{created['id']}", headers=admin_headers,
                            json={"name": "app", "permissions": []})
    assert resp.status == 200
    assert (await client.get("/applications", headers=headers)).status == 403


async def test_replace_validates_like_create(client, admin_headers):
    created = await make_application(client, admin_headers)
    resp = await client.put(f"/applications/{created['id']}", headers=admin_headers,
                            json={"permissions": ["token:read"]})
    assert resp.status == 400
    assert "name" in (await resp.json())["errors"]


# ---- delete --------------------------------------------------------------------------------

async def test_delete_makes_its_keys_fail_at_once_and_it_reads_as_unknown(client, admin_headers):
    created = await make_application(client, admin_headers, permissions=["application:read"])
    headers = key_headers(created)
    assert (await client.get("/applications/self", headers=headers)).status == 200
    resp = await client.delete(f"/applications/{created['id']}", headers=admin_headers)
    assert resp.status == 204
    assert await resp.read() == b""
    assert (await client.get("/applications/self", headers=headers)).status == 401
    assert (await client.get(f"/applications/{created['id']}", headers=admin_headers)).status \
        == 404
    assert (await client.delete(f"/applications/{created['id']}", headers=admin_headers)).status \
        == 404


async def test_an_application_cannot_delete_itself(client, tenant, admin_headers):
    resp = await client.delete(f"/applications/{tenant.application_id}", headers=admin_headers)
    assert resp.status == 400
    assert "cannot delete itself" in (await resp.json())["detail"]
    assert (await client.get("/applications/self", headers=admin_headers)).status == 200


async def test_an_application_cannot_strip_its_own_management_permissions(client,
                                                                         admin_headers):
    manager = await make_application(client, admin_headers, permissions=[
        "application:read", "application:update"])
    url = f"/applications/{manager['id']}"
    resp = await client.put(url, headers=key_headers(manager),
                            json={"name": "m", "permissions": ["application:read"]})
    assert resp.status == 400
    assert "own management permissions" in (await resp.json())["detail"]
    resp = await client.put(url, headers=key_headers(manager), json={
        "name": "renamed", "permissions": ["application:read", "application:update"]})
    assert resp.status == 200
    # Another application may narrow it.
    resp = await client.put(url, headers=admin_headers, json={"name": "m"})
    assert resp.status == 200


# ---- keys ----------------------------------------------------------------------------------

async def test_issue_list_and_revoke_keys(client, admin_headers):
    created = await make_application(client, admin_headers, permissions=["application:read"])
    first = key_headers(created)
    keys_url = f"/applications/{created['id']}/keys"

    resp = await client.post(keys_url, headers=admin_headers)
    assert resp.status == 201
    issued = await resp.json()
    assert set(issued) == {"id", "application_id", "created_at", "key"}
    assert issued["application_id"] == created["id"]
    assert apikeys.well_formed(issued["key"]) and issued["key"] != created["key"]
    second = {"SVC-API-KEY": issued["key"]}
    assert (await client.get("/applications/self", headers=second)).status == 200

    listed = await (await client.get(keys_url, headers=admin_headers)).json()
    assert [set(k) for k in listed["data"]] == [{"id", "application_id", "created_at"}] * 2
    assert issued["id"] in [k["id"] for k in listed["data"]]
    first_id = (await (await client.get("/applications/self", headers=first)).json())["key_id"]

    resp = await client.delete(f"{keys_url}/{first_id}", headers=admin_headers)
    assert resp.status == 204
    assert (await client.get("/applications/self", headers=first)).status == 401
    assert (await client.get("/applications/self", headers=second)).status == 200
    listed = await (await client.get(keys_url, headers=admin_headers)).json()
    assert [k["id"] for k in listed["data"]] == [issued["id"]]
    assert (await client.delete(f"{keys_url}/{first_id}", headers=admin_headers)).status == 404


async def test_rotation_and_no_revoking_the_calling_key(client, admin_headers):
    created = await make_application(client, admin_headers, permissions=["application:update"])
    old = key_headers(created)
    old_id = (await (await client.get("/applications/self", headers=old)).json())["key_id"]
    keys_url = f"/applications/{created['id']}/keys"
    resp = await client.delete(f"{keys_url}/{old_id}", headers=old)
    assert resp.status == 400
    assert "calling with" in (await resp.json())["detail"]

    new = {"SVC-API-KEY": (await (await client.post(keys_url, headers=old)).json())["key"]}
    assert (await client.delete(f"{keys_url}/{old_id}", headers=new)).status == 204
    assert (await client.get("/applications/self", headers=old)).status == 401
    assert (await client.get("/applications/self", headers=new)).status == 200


async def test_unknown_keys_and_ids_are_404(client, admin_headers):
    created = await make_application(client, admin_headers)
    keys_url = f"/applications/{created['id']}/keys"
    for url in (f"{keys_url}/{uuid.uuid4()}", f"{keys_url}/not-a-uuid"):
        resp = await client.delete(url, headers=admin_headers)
        assert resp.status == 404
        assert resp.content_type == "application/problem+json"
    for url in (f"/applications/{uuid.uuid4()}", "/applications/nope",
                f"/applications/{uuid.uuid4()}/keys"):
        assert (await client.get(url, headers=admin_headers)).status == 404


async def test_a_key_of_another_application_cannot_be_revoked_through_this_one(client,
                                                                               admin_headers):
    a = await make_application(client, admin_headers, permissions=["application:read"])
    b = await make_application(client, admin_headers)
    a_key_id = (await (await client.get("/applications/self", headers=key_headers(a)))
                .json())["key_id"]
    resp = await client.delete(f"/applications/{b['id']}/keys/{a_key_id}", headers=admin_headers)
    assert resp.status == 404
    assert (await client.get("/applications/self", headers=key_headers(a))).status == 200


# ---- tenants -------------------------------------------------------------------------------

async def test_another_tenants_application_is_exactly_an_unknown_id(client, admin_headers,
                                                                    other_tenant):
    theirs = other_tenant.application_id
    unknown = str(uuid.uuid4())
    for method, suffix, body in (("GET", "", None), ("PUT", "", {"name": "x"}),
                                 ("DELETE", "", None), ("GET", "/keys", None),
                                 ("POST", "/keys", None)):
        answers = []
        for app_id in (theirs, unknown):
            resp = await client.request(method, f"/applications/{app_id}{suffix}", json=body,
                                        headers={**admin_headers, "SVC-TRACE-ID": COMPARE})
            answers.append((resp.status, await resp.json()))
        assert answers[0] == answers[1]
        assert answers[0][0] == 404
    listed = await (await client.get("/applications", headers=admin_headers)).json()
    assert theirs not in [a["id"] for a in listed["data"]]
    # Their administrator still works: nothing above touched it.
    resp = await client.get("/applications/self", headers={"SVC-API-KEY": other_tenant.key})
    assert resp.status == 200


# ---- secrets -------------------------------------------------------------------------------

async def _tenant_properties(client, tenant_id: str) -> str:
    driver = database(client.server.app).driver
    records, _, _ = await driver.execute_query(
        "MATCH (n) WHERE n.tenant_id = $tenant_id OR (n:Tenant AND n.id = $tenant_id) "
        "OR (n.tenant_key = $tk AND n.tenant_rest = $tr) "  # audit events
        "OPTIONAL MATCH (n)-[r]-() RETURN properties(n) AS node, collect(properties(r)) AS rels",
        {"tenant_id": tenant_id, **audit_tenant(tenant_id)})
    return repr([(r["node"], r["rels"]) for r in records])


async def test_keys_appear_only_in_the_response_that_created_them(client, tenant, admin_headers,
                                                                  caplog):
    caplog.set_level(logging.DEBUG)
    created = await make_application(client, admin_headers, permissions=["application:read"],
                                     rules=[PCI_MASK])
    key = created["key"]
    issued = await (await client.post(f"/applications/{created['id']}/keys",
                                      headers=admin_headers)).json()
    base = f"/applications/{created['id']}"
    seen = []
    for headers in (admin_headers, key_headers(created), {"SVC-API-KEY": issued["key"]}):
        for url in ("/applications", base, f"{base}/keys", "/applications/self"):
            resp = await client.get(url, headers=headers)
            seen.append(await resp.text())
    resp = await client.put(base, headers=admin_headers, json={"name": "renamed"})
    seen.append(await resp.text())
    resp = await client.get("/applications/self", headers={"SVC-API-KEY": key[:-1] + "A"})
    seen.append(await resp.text())
    for secret in (key, issued["key"], key[3:], apikeys.digest(key)):
        assert all(secret not in text for text in seen)
    for secret in (key, issued["key"], key[3:]):
        assert secret not in caplog.text
        assert all(secret not in repr(vars(r)) for r in caplog.records)

    stored = await _tenant_properties(client, tenant.tenant_id)
    assert apikeys.digest(key) in stored  # the dump does see the key nodes...
    for secret in (key, issued["key"], key[3:], issued["key"][3:]):
        assert secret not in stored  # ...and they hold only digests
    assert tenant.key not in stored


# ---- CLI -----------------------------------------------------------------------------------

async def _cli(settings, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "VAULTGRAPH_KEK": settings.kek}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vaultgraph", "applications", "create", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return proc.returncode, out.decode(), err.decode()


async def test_cli_creates_an_application_and_prints_its_key(client, settings, tenant):
    code, out, err = await _cli(
        settings, "--tenant", tenant.tenant_id, "--name", "support",
        "--permission", "application:read", "--permission", "token:read",
        "--rule", orjson.dumps(PCI_MASK).decode())
    assert code == 0, err
    printed = orjson.loads(out)
    assert set(printed) == {"application_id", "key"}
    resp = await client.get("/applications/self", headers={"SVC-API-KEY": printed["key"]})
    body = await resp.json()
    assert body["id"] == printed["application_id"]
    assert body["tenant_id"] == tenant.tenant_id
    assert body["rules"] == [PCI_MASK]
    assert body["created_by"] is None


async def test_cli_refuses_invalid_input_and_unknown_tenants(settings, tenant):
    code, out, err = await _cli(settings, "--tenant", tenant.tenant_id, "--name", "x",
                                "--permission", "token:fly")
    assert (code, out) == (2, "")
    assert "permissions" in err
    code, out, err = await _cli(settings, "--tenant", tenant.tenant_id, "--name", "x",
                                "--rule", "{not json")
    assert (code, out) == (2, "")
    code, out, err = await _cli(settings, "--tenant", str(uuid.uuid4()), "--name", "x")
    assert (code, out) == (1, "")
    assert "tenant" in err


# ---- racing a delete -----------------------------------------------------------------------

def _held_application_delete(app, tenant_id: str, application_id: str) -> list:
    return [(database(app).catalog.text("applications/delete"),
             {"tenant_id": tenant_id, "id": application_id, "deleted_by": "racing-admin"})]


async def test_a_replace_racing_a_delete_is_404(client, tenant, admin_headers):
    # The replace locked the application after the delete committed; it once went on with
    # the deleted application and answered 500 (the update statement returned no row).
    created = await make_application(client, admin_headers, permissions=["token:read"])
    app = client.server.app
    resp = await blocked_behind(
        app, _held_application_delete(app, tenant.tenant_id, created["id"]),
        client.put(f"/applications/{created['id']}", headers=admin_headers,
                   json={"name": "renamed", "permissions": ["token:read"]}),
        statement="applications/lock")
    assert resp.status == 404, await resp.text()
    rows = await database(app).driver.execute_query(
        "MATCH (a:Application {id: $id}) RETURN a.name AS name, a.deleted_by AS by",
        {"id": created["id"]}, database_=database(app).database)
    assert [r.data() for r in rows.records] == [{"name": "app", "by": "racing-admin"}]


async def test_a_key_issued_racing_a_delete_is_404(client, tenant, admin_headers):
    created = await make_application(client, admin_headers, permissions=["token:read"])
    app = client.server.app
    resp = await blocked_behind(
        app, _held_application_delete(app, tenant.tenant_id, created["id"]),
        client.post(f"/applications/{created['id']}/keys", headers=admin_headers),
        statement="applications/lock")
    assert resp.status == 404, await resp.text()
    rows = await database(app).driver.execute_query(
        "MATCH (:Application {id: $id})-[:HAS_KEY]->(k:ApiKey) RETURN k.revoked_at IS NULL AS live",
        {"id": created["id"]}, database_=database(app).database)
    assert [r.data() for r in rows.records] == [{"live": False}]
