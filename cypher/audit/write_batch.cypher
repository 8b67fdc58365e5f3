// Group commit: one batch of events, linked into the writer's chain, in one transaction.
// The chain's head is locked first (the SET) and must stand at the number before the batch's
// first: a batch that would fork the chain (another process writing with the same chain id, or
// a writer that lost track of its head) writes no event and returns in_order = false, and the
// writer starts a new chain. An event a write already created in its own transaction (label
// :PendingAuditEvent) is found by id and completed; any other is created. Each token the event
// names gets an AUDIT_REF self-loop. The head records the last sequence number, so a deleted
// tail is seen. Each event's `at` arrives as ISO-8601 text (repository/database.py event_param)
// and is stored as the DateTime it names.
MERGE (c:AuditChain {id: $chain})
SET c.updated_at = datetime()
WITH c, coalesce(c.seq, 0) = $head_seq - size($events) AS in_order
FOREACH (ev IN CASE WHEN in_order THEN $events ELSE [] END |
  MERGE (e:AuditEvent {id: ev.id})
  SET e = ev, e.at = datetime(ev.at)
  REMOVE e:PendingAuditEvent
  FOREACH (token_id IN coalesce(ev.token_ids, []) |
    CREATE (e)-[:AUDIT_REF {tenant_id: ev.tenant_id, token_id: token_id, at: e.at}]->(e)))
SET c.seq = CASE WHEN in_order THEN $head_seq ELSE c.seq END
RETURN in_order
