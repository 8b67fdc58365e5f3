"""Issue #18.1 (a trailing slash on every route) and #14.4 (W3C traceparent)."""

from __future__ import annotations

import logging
import re

import pytest

from vaultgraph.audit.ids import route_number

CARD = {"type": "card", "data": {"number": "4242424242424242", "expiration_month": 12,
                                 "expiration_year": 2030}}
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


async def test_every_method_accepts_a_trailing_slash_without_a_redirect(client, admin_headers):
    created = await client.post("/tokens/", json=CARD, headers=admin_headers,
                                allow_redirects=False)
    assert created.status == 201, await created.text()
    token = await created.json()
    got = await client.get(f"/tokens/{token['id']}/", headers=admin_headers,
                           allow_redirects=False)
    assert got.status == 200
    assert (await got.json())["data"] == CARD["data"]
    listed = await client.get("/tokens/", params={"type": "card"}, headers=admin_headers,
                              allow_redirects=False)
    assert listed.status == 200
    assert [t["id"] for t in (await listed.json())["data"]] == [token["id"]]
    patched = await client.patch(
        f"/tokens/{token['id']}/", data=b'{"metadata": {"tier": "gold"}}',
        headers={**admin_headers, "Content-Type": "application/merge-patch+json"},
        allow_redirects=False)
    assert patched.status == 200
    assert (await patched.json())["metadata"] == {"tier": "gold"}
    deleted = await client.delete(f"/tokens/{token['id']}/", headers=admin_headers,
                                  allow_redirects=False)
    assert deleted.status == 204
    gone = await client.get(f"/tokens/{token['id']}", headers=admin_headers)
    assert gone.status == 404


async def test_a_slash_does_not_open_unknown_paths_or_change_the_method_check(client):
    assert (await client.get("/no-such-route/")).status == 404
    resp = await client.delete("/health/")
    assert resp.status == 405
    assert resp.content_type == "application/problem+json"
    assert (await client.get("/health/")).status == 200


async def test_the_reference_page_with_a_slash_is_sent_where_its_links_resolve(client):
    """`/docs/` served the page, whose relative `openapi.json` and bundle then resolved under
    `/docs/` (404s: a blank page). It is sent to `/docs`, relatively (a path prefix before it
    is kept), and `/docs` answers the page."""
    resp = await client.get("/docs/", allow_redirects=False)
    assert (resp.status, resp.headers["Location"]) == (308, "../docs")
    page = await client.get("/docs/")  # followed
    assert (page.status, page.url.path) == (200, "/docs")
    assert 'spec-url="openapi.json"' in await page.text()
    assert (await client.get("/openapi.json")).status == 200


async def test_every_answer_names_its_server_without_versions(client, admin_headers):
    """aiohttp's default `Server: Python/3.11 aiohttp/3.x` told a scanner what to try."""
    answers = [await client.get("/tokens", headers=admin_headers),  # a protected route
               await client.get("/tokens"),  # a refusal (401)
               await client.get("/no-such-route"),  # a problem of the router (404)
               await client.get("/health"),  # a public route
               await client.get("/docs/", allow_redirects=False)]  # a redirect
    assert [(r.status, r.headers.getall("Server")) for r in answers] == [
        (200, ["vaultgraph"]), (401, ["vaultgraph"]), (404, ["vaultgraph"]),
        (200, ["vaultgraph"]), (308, ["vaultgraph"])]


async def test_traceparent_sets_the_trace_id_everywhere(client, caplog):
    parent = f"00-{TRACE}-00f067aa0ba902b7-01"
    with caplog.at_level(logging.INFO, logger="vaultgraph.http"):
        resp = await client.get("/tokens/nope", headers={"traceparent": parent})
    assert resp.status == 401
    assert resp.headers["SVC-TRACE-ID"] == TRACE
    echoed = resp.headers["traceparent"]
    assert re.fullmatch(rf"00-{TRACE}-[0-9a-f]{{16}}-01", echoed)
    assert echoed != parent  # a span of ours
    body = await resp.json()
    assert body["trace_id"] == TRACE
    lines = [r for r in caplog.records if r.name == "vaultgraph.http" and r.msg == "request"]
    assert lines
    from vaultgraph.logging_setup import JsonFormatter
    assert f'"trace_id":"{TRACE}"' in JsonFormatter().format(lines[-1])


@pytest.mark.parametrize("bad", [
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
    f"00-{TRACE}-0000000000000000-01",                            # all-zero parent
    f"ff-{TRACE}-00f067aa0ba902b7-01",                            # forbidden version
    f"00-{TRACE.upper()}-00f067aa0ba902b7-01",                    # upper case
    "garbage", f"00-{TRACE}-00f067aa0ba902b7",                     # short
])
async def test_a_malformed_traceparent_is_ignored(client, bad):
    resp = await client.get("/health", headers={"traceparent": bad})
    assert resp.status == 200
    trace_id = resp.headers["SVC-TRACE-ID"]
    assert trace_id != TRACE and re.fullmatch(r"[0-9a-f]{32}", trace_id)
    assert resp.headers["traceparent"].split("-")[1] == trace_id


async def test_every_problem_body_carries_the_trace_id(client):
    resp = await client.get("/no-such-route", headers={"SVC-TRACE-ID": TRACE})
    assert resp.status == 404
    assert (await resp.json())["trace_id"] == TRACE


async def _event_trace_ids(client, token_id: str) -> list[str]:
    from factories import audit_tokens, database

    db = database(client.server.app)
    records, _, _ = await db.driver.execute_query(
        "MATCH (e:AuditEvent) WHERE e.route = $route "
        "RETURN e.trace_id AS trace_id, properties(e) AS p",
        route=route_number("GET /tokens/{id}"), database_=db.database)
    return [r["trace_id"] for r in records if token_id in audit_tokens(r["p"])]


@pytest.mark.parametrize("forged", [
    "forged-trace-123",                  # free text
    TRACE.upper(),                       # upper case
    "0" * 32,                            # all zeros
    TRACE + "0",                         # too long
    TRACE[:-1],                          # too short
    "4bf92f35-77b3-4da6-a3ce-929d0e0e4736",  # a UUID's dashes
    f"00-{TRACE}-00f067aa0ba902b7-01",   # a traceparent in the wrong header
])
async def test_a_malformed_svc_trace_id_never_reaches_the_audit_trail(client, admin_headers,
                                                                      forged):
    """Issue #36: `SVC-TRACE-ID: forged-trace-123` was the audit event's trace id; the trail's
    correlation field must hold only trace ids of the W3C form."""
    token = await _token(client, admin_headers)
    resp = await client.get(f"/tokens/{token}", headers={**admin_headers,
                                                        "SVC-TRACE-ID": forged})
    assert resp.status == 200
    trace_id = resp.headers["SVC-TRACE-ID"]
    assert trace_id != forged and re.fullmatch(r"[0-9a-f]{32}", trace_id)
    assert resp.headers["traceparent"].split("-")[1] == trace_id
    assert await _event_trace_ids(client, token) == [trace_id]


async def test_a_well_formed_svc_trace_id_is_kept_and_traceparent_wins(client, admin_headers):
    token = await _token(client, admin_headers)
    resp = await client.get(f"/tokens/{token}", headers={**admin_headers, "SVC-TRACE-ID": TRACE})
    assert resp.headers["SVC-TRACE-ID"] == TRACE
    assert re.fullmatch(rf"00-{TRACE}-[0-9a-f]{{16}}-00", resp.headers["traceparent"])
    other = "0af7651916cd43dd8448eb211c80319c"
    both = await client.get(f"/tokens/{token}", headers={
        **admin_headers, "SVC-TRACE-ID": TRACE,
        "traceparent": f"00-{other}-b7ad6b7169203331-01"})
    assert both.headers["SVC-TRACE-ID"] == other
    assert sorted(await _event_trace_ids(client, token)) == sorted([TRACE, other])


async def _token(client, headers, **metadata) -> str:
    resp = await client.post("/tokens", json={**CARD, "metadata": metadata}, headers=headers)
    assert resp.status == 201, await resp.text()
    return (await resp.json())["id"]


async def _listed(client, headers, path: str, params) -> dict:
    resp = await client.get(path, params=params, headers=headers, allow_redirects=False)
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def test_a_trailing_slash_keeps_the_query_string(client, admin_headers):
    """Issue #36: `/tokens/?…` answered the first page of every token, filters ignored."""
    ids = sorted([await _token(client, admin_headers, tag="x"),
                  await _token(client, admin_headers, tag="y"),
                  await _token(client, admin_headers, tag="z")])
    tagged = await _listed(client, admin_headers, "/tokens/", {"metadata.tag": "y"})
    by_tag = await _listed(client, admin_headers, "/tokens", {"metadata.tag": "y"})
    assert [t["id"] for t in tagged["data"]] == [t["id"] for t in by_tag["data"]]
    assert len(tagged["data"]) == 1 and tagged["data"][0]["metadata"] == {"tag": "y"}
    two = await _listed(client, admin_headers, "/tokens/", [("id", ids[0]), ("id", ids[2])])
    assert sorted(t["id"] for t in two["data"]) == [ids[0], ids[2]]
    first = await _listed(client, admin_headers, "/tokens/", {"size": "1"})
    assert first["pagination"]["page_size"] == 1 and len(first["data"]) == 1
    assert first["pagination"]["next"] is not None
    second = await _listed(client, admin_headers, "/tokens/",
                           {"size": "1", "start": first["pagination"]["next"]})
    assert len(second["data"]) == 1
    assert second["data"][0]["id"] not in {first["data"][0]["id"]}
    assert {first["data"][0]["id"], second["data"][0]["id"]} < set(ids)


# A value each query schema refuses, by the field it names: a route that reads its query
# answers 400 naming the field; one that lost its query string answers 200.
_REFUSED = {"PageQuery": ("size", "0"), "GraphQuery": ("depth", "999"),
            "LogQuery": ("outcome", "nonsense"), "TokenFilterQuery": None, "TokenListQuery": None}


async def test_every_route_with_a_query_reads_it_after_a_trailing_slash(client, admin_headers):
    from vaultgraph.api.routes import ENDPOINTS

    token = await _token(client, admin_headers)
    checked = []
    for table in ENDPOINTS:
        for endpoint, _ in table:
            refused = [_REFUSED[schema.__name__] for schema in endpoint.query]
            refused = [r for r in refused if r is not None]
            if not endpoint.query:
                continue
            assert refused, f"{endpoint.operation_id}: add its query schema to _REFUSED"
            path = re.sub(r"\{[a-z_]+\}", token, endpoint.path)
            for name, value in refused:
                for url in (path, path + "/"):
                    resp = await client.request(endpoint.method, url, params={name: value},
                                                headers=admin_headers, allow_redirects=False)
                    assert resp.status == 400, (url, name, await resp.text())
                    assert name in (await resp.json())["errors"], url
            checked.append(endpoint.operation_id)
    assert {"listTokens", "listChildTokens", "listParentTokens", "getTokenGraph",
            "listApplications", "listLogs"} <= set(checked)
