"""The at-rest canary scan, for the proxy: a token's plaintext sent through the proxy (and the
destination's answer echoing it) never reaches Neo4j, the logs or the metrics."""

from __future__ import annotations

import dataclasses
import logging
import uuid

import pytest
from factories import audit_tenant, free_port

from vaultgraph.api.metrics import metrics_app
from vaultgraph.api.typedefs import services_key

from ._support import create_proxy, create_token, cypher, start_destination


@pytest.fixture
def settings(settings):
    return dataclasses.replace(settings, webhook_allow_http=True,
                               webhook_allowed_networks="127.0.0.1/32")


async def test_no_plaintext_reaches_neo4j_logs_or_metrics(
        client, admin_headers, tenant, aiohttp_server, aiohttp_client, caplog):
    caplog.set_level(logging.DEBUG)
    canary = f"canary-{uuid.uuid4().hex}"
    destination = await start_destination(aiohttp_server)
    token = await create_token(client, admin_headers, canary)
    proxy = await create_proxy(client, admin_headers, destination.base,
                               header_allowlist=["X-Card"])
    dead = await create_proxy(client, admin_headers, f"http://127.0.0.1:{free_port()}")
    expression = f"{{{{ {token} }}}}"
    calls = [  # (proxy, path, headers, body) — forwarded, echoed, refused, unreachable
        (proxy, "echo", {"Idempotency-Key": "k-1"}, {"v": expression}),
        (proxy, "echo", {"X-Card": expression}, {"v": f"{{{{ {token} | reveal_last: 4 }}}}"}),
        (proxy, "echo", {}, {"v": expression, "w": "{{ unknown-token }}"}),
        (proxy, "huge", {}, {"v": expression}),
        (dead, "x", {}, {"v": expression}),
    ]
    statuses = []
    for target, tail, headers, body in calls:
        resp = await client.post(f"/proxy/{target['id']}/{tail}", json=body,
                                 headers={**admin_headers, **headers})
        await resp.read()
        statuses.append(resp.status)
    assert statuses == [201, 201, 400, 502, 502]
    assert any(canary.encode() in r["body"] for r in destination.requests)  # it was sent
    await client.server.app[services_key].audit_writer.settle()

    # (audit events hold the tenant's id as two integers, vaultgraph/audit/ids.py)
    nodes = await cypher(client, "MATCH (n) WHERE n.tenant_id = $t OR n:Proxy "
                                 "OR (n.tenant_key = $tk AND n.tenant_rest = $tr) "
                                 "RETURN labels(n) AS labels, properties(n) AS p",
                         t=tenant.tenant_id, **audit_tenant(tenant.tenant_id))
    edges = await cypher(client, "MATCH ()-[r]->() WHERE r.tenant_id = $t "
                                 "RETURN properties(r) AS p", t=tenant.tenant_id)
    stored = str(nodes) + str(edges)
    assert "AuditEvent" in stored and "Proxy" in stored and token in stored
    assert canary not in stored
    assert canary not in caplog.text
    assert caplog.records  # the calls were logged (their route and status)
    metrics = await (await (await aiohttp_client(metrics_app())).get("/metrics")).text()
    assert "/proxy/" in metrics and canary not in metrics
