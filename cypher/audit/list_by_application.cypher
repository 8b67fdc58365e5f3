// A page of one application's events, newest first: a seek on (tenant_id, application_id, at).
MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_id, application_id, at)
WHERE e.tenant_id = $tenant_id AND e.application_id = $application_id
  AND e.at >= $since AND e.at <= $until
  AND e.at <= $before_at AND CASE WHEN e.at = $before_at THEN e.id < $before_id ELSE true END
  AND ($operation IS NULL OR e.operation = $operation)
  AND ($outcome IS NULL OR e.outcome = $outcome)
WITH e ORDER BY e.tenant_id DESC, e.application_id DESC, e.at DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
