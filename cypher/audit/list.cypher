// A page of the tenant's events, newest first, from the (tenant_id, at) index read backwards;
// the cursor is the (at, id) of the last event seen. Other filters are checked per event.
MATCH (e:AuditEvent)
WHERE e.tenant_id = $tenant_id AND e.at >= $since AND e.at <= $until
  AND (e.at < $before_at OR (e.at = $before_at AND e.id < $before_id))
  AND ($application_id IS NULL OR e.application_id = $application_id)
  AND ($operation IS NULL OR e.operation = $operation)
  AND ($outcome IS NULL OR e.outcome = $outcome)
WITH e ORDER BY e.tenant_id DESC, e.at DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
