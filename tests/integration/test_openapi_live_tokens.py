"""Live answers of the four main token routes (create, list, get, update; delete too) in the
shapes test_openapi_live.py does not reach, validated against the served /openapi.json: each
token type, reads through masking and redacting rules, and every refusal (400, 401, 403, 404,
409, 413, 415) as the document declares it."""

from __future__ import annotations

import io

import pytest
from factories import key_headers, make_application
from test_openapi_live import Conformance

MERGE_PATCH = "application/merge-patch+json"
ALL = ["token:create", "token:read", "token:update", "token:delete"]
TYPES = {
    "card": {"number": "4242424242424242", "expiration_month": 1, "expiration_year": 2031,
             "cvc": "999"},
    "bank": {"routing_number": "021000021", "account_number": "73920485617"},
    "social_security_number": "512-63-0947",
    "employer_id_number": "12-3456789",
    "token": {"nested": [1, 2.5, None, True, {"deep": "x"}]},
}


@pytest.fixture
async def api(client) -> Conformance:
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    return Conformance(client, await resp.json())


async def _app(client, admin_headers, transform: str, permissions=ALL) -> dict[str, str]:
    return key_headers(await make_application(
        client, admin_headers, permissions=permissions,
        rules=[{"container": "/", "transform": transform, "permissions": permissions}]))


async def test_every_type_through_every_transform_fits_the_document(api, client,
                                                                    admin_headers):
    viewers = {"reveal": admin_headers,
               "mask": await _app(client, admin_headers, "mask"),
               "redact": await _app(client, admin_headers, "redact")}
    ids = []
    for token_type, data in TYPES.items():
        created = await api.call("POST", "/tokens", expect=201, headers=admin_headers,
                                 json={"type": token_type, "data": data,
                                       "metadata": {"t": token_type}})
        ids.append(created["id"])
    for transform, headers in viewers.items():
        shown = []
        for token_id in ids:
            token = await api.call("GET", "/tokens/{id}", expect=200, headers=headers,
                                   id=token_id)
            shown.append(("data" in token, "mask" in token, "fingerprint" in token))
            await api.call("PATCH", "/tokens/{id}", expect=200, headers=headers, id=token_id,
                           json={"metadata": {"seen": transform}}, content_type=MERGE_PATCH)
        page = await api.call("GET", "/tokens", expect=200, headers=headers,
                              params={"size": "100"})
        assert set(ids) <= {t["id"] for t in page["data"]}
        # the transforms did differ, so each shape was validated (docs/security.md's table;
        # the four typed tokens have a default mask, the plain "token" none)
        assert shown == {"reveal": [(True, True, True)] * 4 + [(True, False, True)],
                         "mask": [(True, True, False)] * 4 + [(False, False, False)],
                         "redact": [(False, False, False)] * 5}[transform], shown
        await api.call("POST", "/tokens", expect=201, headers=headers,
                       json={"type": "token", "data": transform})


async def test_every_refusal_of_the_token_routes_fits_the_document(api, client, admin_headers,
                                                                   settings):
    h = admin_headers
    reader = await _app(client, admin_headers, "reveal", permissions=["token:read"])
    token = await api.call("POST", "/tokens", expect=201, headers=h,
                           json={"id": "tok-r", "type": "token", "data": "x"})
    too_big = io.BytesIO(b'{"type": "token", "data": "' + b"x" * settings.max_body_bytes + b'"}')
    for method, path, kw in [("POST", "/tokens", {"json": {"type": "token", "data": 1}}),
                             ("GET", "/tokens", {}),
                             ("GET", "/tokens/{id}", {"id": token["id"]}),
                             ("PATCH", "/tokens/{id}", {"id": token["id"], "json": {},
                                                        "content_type": MERGE_PATCH}),
                             ("DELETE", "/tokens/{id}", {"id": token["id"]})]:
        await api.call(method, path, expect=401, headers={"SVC-API-KEY": "vg_nope"}, **kw)
    await api.call("POST", "/tokens", expect=403, headers=reader,
                   json={"type": "token", "data": 1})
    await api.call("PATCH", "/tokens/{id}", expect=403, headers=reader, id=token["id"],
                   json={"data": 2}, content_type=MERGE_PATCH)
    await api.call("DELETE", "/tokens/{id}", expect=403, headers=reader, id=token["id"])
    await api.call("PATCH", "/tokens/{id}", expect=404, headers=h, id="no-such-token",
                   json={"data": 2}, content_type=MERGE_PATCH)
    await api.call("PATCH", "/tokens/{id}", expect=400, headers=h, id=token["id"],
                   json={"containers": ["no-slashes"]}, content_type=MERGE_PATCH)
    await api.call("PATCH", "/tokens/{id}", expect=400, headers=h, id=token["id"],
                   data=b"{not json", content_type=MERGE_PATCH)
    await api.call("POST", "/tokens", expect=400, headers=h, data=b"[1,",
                   content_type="application/json")
    await api.call("POST", "/tokens", expect=415, headers=h, data=b"{}",
                   content_type="text/plain")
    await api.call("POST", "/tokens", expect=413, headers=h, data=too_big,
                   content_type="application/json")
    await api.call("GET", "/tokens", expect=400, headers=h, params={"size": "101"})
    await api.call("GET", "/tokens/{id}", expect=404, headers=reader, id="no-such-token")
