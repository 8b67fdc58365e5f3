// Group commit: one batch of events, linked into the writer's chain, in one transaction.
// A chain this statement starts is placed (audit/chain.py): each event's MAC covers its own
// fields and its place, not the MAC of the event before.
// The chain's head is locked first (the SET) and must stand at the number before the batch's
// first: a batch that would fork the chain (another process writing with the same chain id, or
// a writer that lost track of its head) writes no event and returns in_order = false, and the
// writer starts a new chain. Each event's time comes and is stored as an integer, microseconds
// since 1970 (repository/audit.py, docs/adr/0028). $created: {at, fields}, events no statement was sent
// to store (reads, refusals before any write), created whole. $linked: {id, at, held, fields},
// events a write stored, or may have stored (its commit unconfirmed), in its own transaction
// (label :PendingAuditEvent, unique by id): found by id and completed with `fields` alone — what differs from
// what the write stored, and the chain's fields — so their time and what the write already
// stored (`held`), which the indexes hold, are not written again; one that is not there (the
// write rolled back) is created whole from both. An event naming one token holds it as a
// scalar (`token_key` and `token_rest` in its fields, indexed with tenant and time); one
// naming several gets an AUDIT_REF self-loop per token (`ev.refs`, each token's key and rest,
// and `ev.tenant_key`: repository/audit.py `ref_parts`), holding those integers and the time;
// its index holds the keys and the time. The head records the
// last sequence number, so a deleted tail is seen. `e.pending = null` clears the flag the
// expiry sweep's events (and earlier versions' writes) hold; a request's write stores none.
// $blocks: {at, fields}, each settling write events (audit/chain.py), created whole with their
// own label. $placed: {chain, seq, at, tenant_key, refs, fields}, write events whose request
// did not end as their write's statement stored them (or whose write may not have committed):
// each written whole at its place, waiting on a write there that is still running, whatever
// was there replaced, its AUDIT_REFs too (the batch's block pins the MAC that stands).
MERGE (c:AuditChain {id: $chain})
ON CREATE SET c.placed = true
SET c.updated_at = datetime()
WITH c, coalesce(c.seq, 0) = $head_seq - size($created) - size($linked) - size($blocks)
          AS in_order
FOREACH (ev IN CASE WHEN in_order THEN $created ELSE [] END |
  CREATE (e:AuditEvent)
  SET e = ev.fields, e.at = ev.at
  FOREACH (ref IN ev.refs |
    CREATE (e)-[:AUDIT_REF {tenant_key: ev.tenant_key, token_key: ref[0], token_rest: ref[1],
                            at: e.at}]->(e)))
FOREACH (ev IN CASE WHEN in_order THEN $linked ELSE [] END |
  MERGE (e:PendingAuditEvent {id: ev.id})
  ON CREATE SET e:AuditEvent, e = ev.held, e += ev.fields, e.id = ev.id, e.at = ev.at
  ON MATCH SET e += ev.fields, e.pending = null
  REMOVE e:PendingAuditEvent
  FOREACH (ref IN ev.refs |
    CREATE (e)-[:AUDIT_REF {tenant_key: ev.tenant_key, token_key: ref[0], token_rest: ref[1],
                            at: e.at}]->(e)))
FOREACH (ev IN CASE WHEN in_order THEN $blocks ELSE [] END |
  CREATE (e:AuditEvent:AuditBlock)
  SET e = ev.fields, e.at = ev.at)
WITH c, in_order
CALL (in_order) {
  UNWIND CASE WHEN in_order THEN $placed ELSE [] END AS ev
  MERGE (e:WriteAuditEvent {chain: ev.chain, seq: ev.seq})
  ON CREATE SET e:AuditEvent
  SET e = ev.fields, e.at = ev.at
  WITH e, ev
  CALL (e) { MATCH (e)-[old:AUDIT_REF]->(e) DELETE old }
  FOREACH (ref IN ev.refs |
    CREATE (e)-[:AUDIT_REF {tenant_key: ev.tenant_key, token_key: ref[0], token_rest: ref[1],
                            at: e.at}]->(e))
}
SET c.seq = CASE WHEN in_order THEN $head_seq ELSE c.seq END
RETURN in_order
