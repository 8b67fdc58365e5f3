// A page of the events that name one token, newest first. An event naming only that token
// holds it as the scalar `token_id`: a seek on (tenant_id, token_id, at). One naming several
// (and every event stored before the scalar) has an AUDIT_REF self-loop per token: a seek on
// the AUDIT_REF index (tenant_id, token_id, at). Each seek reads in index order and stops at a
// page; the newest of the two pages (at most twice the page, sorted) are the page. A deleted
// token's events stay readable by its id.
CALL () {
  MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_id, token_id, at)
  WHERE e.tenant_id = $tenant_id AND e.token_id = $token_id
    AND e.at >= $since AND e.at <= $until
    AND e.at <= $before_at AND CASE WHEN e.at = $before_at THEN e.id < $before_id ELSE true END
    AND ($application_id IS NULL OR e.application_id = $application_id)
    AND ($operation IS NULL OR e.operation = $operation)
    AND ($outcome IS NULL OR e.outcome = $outcome)
  WITH e ORDER BY e.tenant_id DESC, e.token_id DESC, e.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
  UNION
  MATCH (e:AuditEvent)-[r:AUDIT_REF]->(e) USING INDEX SEEK r:AUDIT_REF(tenant_id, token_id, at)
  WHERE r.tenant_id = $tenant_id AND r.token_id = $token_id
    AND r.at >= $since AND r.at <= $until
    AND r.at <= $before_at AND CASE WHEN r.at = $before_at THEN e.id < $before_id ELSE true END
    AND ($application_id IS NULL OR e.application_id = $application_id)
    AND ($operation IS NULL OR e.operation = $operation)
    AND ($outcome IS NULL OR e.outcome = $outcome)
  WITH e, r ORDER BY r.tenant_id DESC, r.token_id DESC, r.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
}
WITH e ORDER BY e.at DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
