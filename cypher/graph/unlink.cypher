// Remove the parent → child link between two live tokens the caller may delete.
// Both nodes are locked in id order before the link is looked up, so of two racing unlinks one
// removes the edge and the other finds none (a clean 404, never an error on a vanished edge).
// No row: either end is unknown, expired, outside the caller's rules or in another tenant.
// @visible/@live/@in_prefixes: cypher/fragments/ (expanded when the catalog loads).
// Inside a request it is sent with the audit prefix in front (repository/audit_prefix.py;
// docs/architecture.md, "The audit prefix").
MATCH (p:Token {tenant_id: $tenant_id, id: $parent_id})
WHERE @visible(p)
MATCH (c:Token {tenant_id: $tenant_id, id: $child_id})
WHERE c <> p
  AND @visible(c)
CALL (p, c) {
  UNWIND CASE WHEN p.id < c.id THEN [p, c] ELSE [c, p] END AS n
  SET n._lock = true
  REMOVE n._lock
}
OPTIONAL MATCH (p)-[r:PARENT_OF]->(c)
WITH p, c, r, r IS NOT NULL AS removed
DELETE r
// The webhook outbox (@outbox): a link removed, for webhooks holding both ends.
WITH removed, CASE WHEN removed THEN {
       event_id: randomUUID(), type: "token.unlinked", at: datetime(), tenant_id: p.tenant_id,
       token_id: p.id, token_type: p.type, containers: p.containers,
       child_containers: c.containers, application_id: $actor, parent_id: p.id,
       child_id: c.id} END AS webhook_event
@outbox(webhook_event)
RETURN removed
