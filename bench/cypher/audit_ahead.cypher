// bench/audit_forms.py, form `ahead`: cypher/audit/write_batch with one more list, $ahead:
// events handed over ahead of their write, stored pending as the write's statement would
// have stored them (repository/audit_prefix.py) and linked by a later batch as the service
// links a write's event. A measurement of that form, not the product's statement.
MERGE (c:AuditChain {id: $chain})
SET c.updated_at = datetime()
WITH c, coalesce(c.seq, 0) = $head_seq - size($created) - size($ahead) - size($linked) AS in_order
FOREACH (ev IN CASE WHEN in_order THEN $ahead ELSE [] END |
  CREATE (e:AuditEvent:PendingAuditEvent)
  SET e = ev.fields, e.at = ev.at)
FOREACH (ev IN CASE WHEN in_order THEN $created ELSE [] END |
  CREATE (e:AuditEvent)
  SET e = ev.fields, e.at = ev.at
  FOREACH (token_id IN CASE WHEN size(ev.fields.token_ids) > 1 THEN ev.fields.token_ids
                            ELSE [] END |
    CREATE (e)-[:AUDIT_REF {tenant_id: ev.tenant_id, token_id: token_id, at: e.at}]->(e)))
FOREACH (ev IN CASE WHEN in_order THEN $linked ELSE [] END |
  MERGE (e:PendingAuditEvent {id: ev.id})
  ON CREATE SET e:AuditEvent, e = ev.held, e += ev.fields, e.id = ev.id, e.at = ev.at
  ON MATCH SET e += ev.fields, e.pending = null
  REMOVE e:PendingAuditEvent
  FOREACH (token_id IN CASE WHEN size(coalesce(ev.fields.token_ids, ev.held.token_ids)) > 1
                            THEN coalesce(ev.fields.token_ids, ev.held.token_ids) ELSE [] END |
    CREATE (e)-[:AUDIT_REF {tenant_id: ev.tenant_id, token_id: token_id, at: e.at}]->(e)))
SET c.seq = CASE WHEN in_order THEN $head_seq ELSE c.seq END
RETURN in_order
