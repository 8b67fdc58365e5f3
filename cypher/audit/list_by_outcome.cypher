// A page of events of one outcome, newest first: a seek on (tenant_id, outcome, at).
MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_id, outcome, at)
WHERE e.tenant_id = $tenant_id AND e.outcome = $outcome
  AND e.at >= $since AND e.at <= $until
  AND e.at <= $before_at AND CASE WHEN e.at = $before_at THEN e.id < $before_id ELSE true END
  AND ($application_id IS NULL OR e.application_id = $application_id)
  AND ($operation IS NULL OR e.operation = $operation)
WITH e ORDER BY e.tenant_id DESC, e.outcome DESC, e.at DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
