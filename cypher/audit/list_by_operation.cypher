// A page of events of one operation, newest first: a seek on (tenant_id, operation, at).
MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_id, operation, at)
WHERE e.tenant_id = $tenant_id AND e.operation = $operation
  AND e.at >= $since AND e.at <= $until
  AND e.at <= $before_at AND CASE WHEN e.at = $before_at THEN e.id < $before_id ELSE true END
  AND ($application_id IS NULL OR e.application_id = $application_id)
  AND ($outcome IS NULL OR e.outcome = $outcome)
WITH e ORDER BY e.tenant_id DESC, e.operation DESC, e.at DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
