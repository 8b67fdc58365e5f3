"""Background work in every replica at once (docs/operations.md, "Scale-out"): two replicas' expiry
sweeps over the same expired tokens, then their audit prunes over the same old events, run together.
Each replica is the service's own wiring (`open_services`: its own driver, sweeper, audit writer and
chain), as `vaultgraph serve` builds it; running them in this process lets the test start both
passes at the same moment instead of hoping two timers meet."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta

from factories import audit_tenant, audit_tokens, retime_chain

from vaultgraph.audit.event import SYSTEM
from vaultgraph.services import expiry
from vaultgraph.testing.service import free_port
from vaultgraph.wiring import open_services

from .conftest import two_replicas
from .test_metrics import scrape

EXPIRED = 400
BATCH = 20  # small batches: each pass is many statements, so the two passes interleave
ANCIENT = datetime(1991, 1, 1, tzinfo=UTC)
OLD = datetime(1990, 1, 1, tzinfo=UTC)
SWEPT = ("vaultgraph_expiry_deleted_tokens_total", frozenset())
META = "k\u001fv"  # one metadata entry, k=v, as tokens/create stores it
# Test set-up: expired tokens written directly (the API refuses a past expires_at).
EXPIRED_TOKENS = """
    UNWIND range(0, $n - 1) AS i
    CREATE (t:Token {tenant_id: $t, id: 'expired-' + i, type: 'token',
                     containers: ['/general/high/'], data_ct: 'ciphertext',
                     fingerprint: 'fp-' + i, created_by: 'test',
                     created_at: datetime() - duration('P1D'),
                     expires_at: datetime() - duration({seconds: 1 + i})})
    CREATE (t)-[:HAS_META {tenant_id: $t, kv: $kv, token_id: t.id}]->(t)"""


async def cypher(services, statement: str, **params) -> list[dict]:
    db = services.database
    records, _, _ = await db.driver.execute_query(statement, params, database_=db.database)
    return [dict(r) for r in records]


def replica_settings(settings):
    return dataclasses.replace(settings, expiry_sweep_batch=BATCH, expiry_sweep_interval=0,
                               audit_prune_interval=0)


async def sweep_at_once(settings, a, b) -> set[str]:
    """EXPIRED expired tokens in a new tenant, swept by replicas a and b at once; checks that
    each token was swept and counted once, with its one right event. The two audit chains."""
    async with open_services(replica_settings(settings)) as other:
        await other.expiry.sweep()  # other tests' expired tokens: not part of this test
    tenant = await a.tenants.create("sweeps-at-once")
    # An event's time is stored as microseconds since 1970 (docs/adr/0028).
    [started] = await cypher(a, "RETURN datetime().epochSeconds * 1000000 "
                                "+ datetime().microsecond AS now")
    await cypher(a, EXPIRED_TOKENS, t=tenant.tenant_id, n=EXPIRED, kv=META)

    swept: list[int] = []
    for _ in range(10):  # a batch that lost a deadlock is left for the next pass
        swept += await asyncio.gather(a.expiry.sweep(), b.expiry.sweep())
        [left] = await cypher(a, "MATCH (t:Token {tenant_id: $t}) RETURN count(t) AS n",
                              t=tenant.tenant_id)
        if left["n"] == 0:
            break
    await a.audit_writer.settle()
    await b.audit_writer.settle()
    chains = a.audit_writer.chains | b.audit_writer.chains

    references = await cypher(a, """
        MATCH (d:DeletedToken {tenant_id: $t})
        RETURN d.id AS id, d.deleted_reason AS reason, d.deleted_by AS by,
               count { (d)--() } AS edges""", t=tenant.tenant_id)
    assert sorted(r["id"] for r in references) == sorted(f"expired-{i}"
                                                         for i in range(EXPIRED))
    assert {(r["reason"], r["by"], r["edges"]) for r in references} == {
        (expiry.REASON, expiry.ACTOR, 0)}

    events = await cypher(a, """
        MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr})
        RETURN properties(e) AS p, e.application_id AS application_id,
               e.operation AS operation, e.outcome AS outcome, e.status AS status,
               e.reason AS reason, toString(e.chain) AS chain, e.seq AS seq,
               e:PendingAuditEvent AS pending""", **audit_tenant(tenant.tenant_id))
    per_token = Counter(token for e in events for token in audit_tokens(e["p"]))
    assert per_token == Counter({f"expired-{i}": 1 for i in range(EXPIRED)})
    assert {(e["application_id"], e["operation"], e["outcome"], e["status"], e["reason"],
             e["pending"]) for e in events} == {
        (SYSTEM, expiry.OPERATION, "success", 204, expiry.REASON, False)}
    assert {e["chain"] for e in events} <= chains
    assert len({(e["chain"], e["seq"]) for e in events}) == EXPIRED
    # What both passes reported is what they did: every expiry event since the start
    # (another tenant's token expiring meanwhile would be in both figures).
    [made] = await cypher(a, """
        MATCH (e:AuditEvent) WHERE e.at >= $since AND e.reason = $reason
          AND e.application_id = $system
        RETURN count(e) AS n""", since=started["now"], reason=expiry.REASON, system=SYSTEM)
    assert sum(swept) == made["n"] >= EXPIRED

    return chains


async def test_expiry_sweeps_of_two_replicas_at_once_delete_and_count_each_token_once(
        settings):
    async with open_services(replica_settings(settings)) as a, \
            open_services(replica_settings(settings)) as b:
        await sweep_at_once(settings, a, b)


async def aged(a, chains: set[str]) -> tuple[int, dict[str, int]]:
    """The chains' events made older than the retention (and signed so): their number, each
    chain's top. Old events other tests left are pruned first, so a prune's count is these."""
    await a.audit_pruner.prune_before(ANCIENT)
    for chain in chains:
        await retime_chain(a, chain, lambda e: OLD + timedelta(seconds=e["seq"]))
    tops = {r["chain"]: (r["seq"], r["n"]) for r in await cypher(a, """
        MATCH (e:AuditEvent) WHERE toString(e.chain) IN $chains
        RETURN toString(e.chain) AS chain, max(e.seq) AS seq, count(e) AS n""",
        chains=list(chains))}
    return sum(n for _, n in tops.values()), {c: seq for c, (seq, _) in tops.items()}


async def test_audit_prunes_of_two_replicas_at_once_leave_one_checkpoint_per_chain(settings):
    async with open_services(replica_settings(settings)) as a, \
            open_services(replica_settings(settings)) as b:
        chains = await sweep_at_once(settings, a, b)
        total, tops = await aged(a, chains)
        pruned = await asyncio.gather(a.audit_pruner.prune_before(ANCIENT, batch=BATCH),
                                      b.audit_pruner.prune_before(ANCIENT, batch=BATCH))
        assert sum(pruned) == total  # each event counted by the prune that deleted it
        [left] = await cypher(a, "MATCH (e:AuditEvent) WHERE toString(e.chain) IN $chains "
                                 "RETURN count(e) AS n", chains=list(chains))
        assert left["n"] == 0
        checkpoints = await cypher(a, """
            MATCH (k:AuditCheckpoint) WHERE k.chain IN $chains
            RETURN k.chain AS chain, k.seq AS seq""", chains=list(chains))
        assert {r["chain"]: r["seq"] for r in checkpoints} == tops
        assert len(checkpoints) == len(tops)


async def test_two_serving_replicas_sweep_together_and_count_each_token_once(settings, graph):
    """The same, as deployed: two `vaultgraph serve` processes whose sweepers run every 0.2 s;
    each replica's metrics count the tokens it deleted, and the two add up to the tokens."""
    ports = free_port(), free_port()
    sweeping = {"VAULTGRAPH_EXPIRY_SWEEP_INTERVAL": "0.2",
                "VAULTGRAPH_EXPIRY_SWEEP_BATCH": str(BATCH)}
    with two_replicas(settings, ({"VAULTGRAPH_METRICS_PORT": str(ports[0])},
                                 {"VAULTGRAPH_METRICS_PORT": str(ports[1])}),
                      **sweeping) as (a, _):
        tenant = a.create_tenant("serving-sweeps")
        before = [scrape(port).get(SWEPT, 0.0) for port in ports]
        [started] = await graph("RETURN datetime().epochSeconds * 1000000 "
                                "+ datetime().microsecond AS now")
        await graph(EXPIRED_TOKENS, t=tenant.tenant_id, n=EXPIRED, kv=META)
        for _ in range(600):
            [state] = await graph("""
                CALL () { MATCH (t:Token {tenant_id: $t}) RETURN count(t) AS live }
                CALL () { MATCH (e:PendingAuditEvent) WHERE e.tenant_id = $t
                            OR (e.tenant_key = $tk AND e.tenant_rest = $tr)
                          RETURN count(e) AS pending }
                RETURN live, pending""", t=tenant.tenant_id, **audit_tenant(tenant.tenant_id))
            if state == {"live": 0, "pending": 0}:
                break
            await asyncio.sleep(0.1)
        assert state == {"live": 0, "pending": 0}
        counted = [scrape(port).get(SWEPT, 0.0) - was
                   for port, was in zip(ports, before, strict=True)]

    events = await graph("MATCH (e:AuditEvent {tenant_key: $tk, tenant_rest: $tr}) "
                         "RETURN properties(e) AS p, "
                         "e.reason AS reason, e.chain AS chain", **audit_tenant(tenant.tenant_id))
    # Besides the sweeps' events, the one `tenants create` left (the command line's change).
    made_by_the_command = [e for e in events if e["p"].get("route") == "CLI tenants create"]
    assert len(made_by_the_command) == 1
    events = [e for e in events if e not in made_by_the_command]
    assert Counter(i for e in events for i in audit_tokens(e["p"])) == Counter(
        {f"expired-{i}": 1 for i in range(EXPIRED)})
    assert {e["reason"] for e in events} == {expiry.REASON}
    assert all(e["chain"] for e in events)
    [made] = await graph("""
        MATCH (e:AuditEvent) WHERE e.at >= $since AND e.reason = $reason
          AND e.application_id = $system
        RETURN count(e) AS n""", since=started["now"], reason=expiry.REASON, system=SYSTEM)
    assert sum(counted) == made["n"] >= EXPIRED, counted
