// A page of the events that name one token, newest first: a seek on the AUDIT_REF index
// (tenant_id, token_id, at). A deleted token's events stay readable by its id.
MATCH (e:AuditEvent)-[r:AUDIT_REF]->(e) USING INDEX SEEK r:AUDIT_REF(tenant_id, token_id, at)
WHERE r.tenant_id = $tenant_id AND r.token_id = $token_id
  AND r.at >= $since AND r.at <= $until
  AND r.at <= $before_at AND CASE WHEN r.at = $before_at THEN e.id < $before_id ELSE true END
  AND ($application_id IS NULL OR e.application_id = $application_id)
  AND ($operation IS NULL OR e.operation = $operation)
  AND ($outcome IS NULL OR e.outcome = $outcome)
WITH e, r ORDER BY r.tenant_id DESC, r.token_id DESC, r.at DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
