// bench/audit_forms.py, form `once`: a batch as cypher/audit/write_batch stores it, but a
// write's events are already complete, so it records one block naming them (their ids and
// MACs) instead of completing each. A measurement of that form, not the product's statement.
MERGE (c:AuditChain {id: $chain})
SET c.updated_at = datetime()
WITH c, coalesce(c.seq, 0) = $head_seq - size($created) - size($linked) AS in_order
FOREACH (ev IN CASE WHEN in_order THEN $created ELSE [] END |
  CREATE (e:AuditEvent)
  SET e = ev.fields, e.at = ev.at
  FOREACH (token_id IN CASE WHEN size(ev.fields.token_ids) > 1 THEN ev.fields.token_ids
                            ELSE [] END |
    CREATE (e)-[:AUDIT_REF {tenant_id: ev.tenant_id, token_id: token_id, at: e.at}]->(e)))
FOREACH (_ IN CASE WHEN in_order AND size($linked) > 0 THEN [1] ELSE [] END |
  CREATE (:AuditBlock {chain: $chain, seq: $head_seq, ids: $linked, macs: $macs}))
SET c.seq = CASE WHEN in_order THEN $head_seq ELSE c.seq END
RETURN in_order
