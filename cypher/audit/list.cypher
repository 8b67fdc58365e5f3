// A page of the tenant's events, newest first, from the (tenant_id, at) index read backwards;
// the cursor is the (at, id) of the last event seen. Other filters are checked per event. The
// cursor is one range on `at` (`<= $before_at`) with the tie on `id` as a filter (a CASE, which
// the planner cannot split), so the seek reads in index order and stops at the page (ties of
// one instant sorted by id: PartialTop); an OR there made the planner union two seeks and sort
// every event of the tenant in the range, for each page. The hint keeps this index whatever the
// statistics say (the other indexes on tenant_id would sort). The other log statements follow
// the same shape on their own index.
MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_id, at)
WHERE e.tenant_id = $tenant_id AND e.at >= $since AND e.at <= $until
  AND e.at <= $before_at AND CASE WHEN e.at = $before_at THEN e.id < $before_id ELSE true END
  AND ($application_id IS NULL OR e.application_id = $application_id)
  AND ($operation IS NULL OR e.operation = $operation)
  AND ($outcome IS NULL OR e.outcome = $outcome)
WITH e ORDER BY e.tenant_id DESC, e.at DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
