// Link two live tokens the caller may read, parent → child, in one statement.
// Both nodes are write-locked first, in id order (so A→B and B→A racing cannot deadlock); the
// existence check that follows runs under those locks, so of N concurrent identical calls exactly
// one sees no edge, MERGE creates one edge, and that caller alone gets `created`.
// Both ends are checked again under those locks (reads there see the committed state): an end
// deleted, merged away by a dedup update or swept while this statement waited is not linked.
// No row: either end is unknown, expired, unreadable or in another tenant (all answer 404).
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
WITH p, c WHERE p:Token AND c:Token AND @visible(p) AND @visible(c)
WITH p, c, EXISTS { (p)-[:PARENT_OF]->(c) } AS existed
MERGE (p)-[r:PARENT_OF]->(c)
  ON CREATE SET r.created_at = datetime()
// The webhook outbox (@outbox): a new link only, for webhooks holding both ends.
WITH p, c, r, existed, CASE WHEN NOT existed THEN {
       event_id: randomUUID(), type: "token.linked", at: datetime(), tenant_id: p.tenant_id,
       token_id: p.id, token_type: p.type, containers: p.containers,
       child_containers: c.containers, application_id: $actor, parent_id: p.id,
       child_id: c.id} END AS webhook_event
@outbox(webhook_event)
// The link's time as text: a temporal value would cost the driver a DateTime built in Python.
RETURN NOT existed AS created, toString(r.created_at) AS created_at
