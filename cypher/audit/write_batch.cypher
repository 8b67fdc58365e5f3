// Group commit: one batch of events, linked into the writer's chain, in one transaction.
// An event a write already created in its own transaction (label :PendingAuditEvent) is found
// by id and completed; any other is created. Each token the event names gets an AUDIT_REF
// self-loop. The chain's head records the last sequence number, so a deleted tail is seen.
UNWIND $events AS ev
MERGE (e:AuditEvent {id: ev.id})
SET e = ev
REMOVE e:PendingAuditEvent
FOREACH (token_id IN coalesce(ev.token_ids, []) |
  CREATE (e)-[:AUDIT_REF {tenant_id: ev.tenant_id, token_id: token_id, at: ev.at}]->(e))
WITH count(e) AS written
MERGE (c:AuditChain {id: $chain})
SET c.seq = $head_seq, c.updated_at = datetime()
RETURN written
