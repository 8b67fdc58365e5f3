// A page of the tenant's events, newest first, from the (tenant_key, at) index read backwards;
// the cursor is the (at, id) of the last event seen. Other filters are checked per event. The
// cursor is one range on `at` (`<= $before_at`) with the tie on `id` as a filter (a CASE, which
// the planner cannot split), so the seek reads in index order and stops at the page (ties of
// one instant sorted by id: PartialTop); an OR there made the planner union two seeks and sort
// every event of the tenant in the range, for each page. The hint keeps this index whatever the
// statistics say (the other indexes on the tenant would sort). The other log statements follow
// the same shape on their own index.
// Events hold the ids as integers (docs/adr/0026, audit/ids.py): the first branch seeks on the
// tenant's key and checks the rest of its id per event (`coalesce`: the rest of a UUID, the text
// of any other id); the second seeks on the ids' text, for events stored before. Each branch reads
// in index order and stops at a page; the newest of the two pages are the page.
CALL () {
  MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_key, at)
  WHERE e.tenant_key = $tenant_key
    AND e.at >= $since AND e.at <= $until
    AND e.at <= $before_at AND CASE WHEN e.at = $before_at THEN e.id < $before_id ELSE true END
    AND coalesce(e.tenant_rest = $tenant_rest, e.tenant_id = $tenant_id)
    AND ($application_id IS NULL OR (e.application_key = $application_key
         AND coalesce(e.application_rest = $application_rest, e.application_id = $application_id)))
    AND ($operation IS NULL OR e.operation = $operation)
    AND ($outcome IS NULL OR e.outcome = $outcome)
  WITH e ORDER BY e.tenant_key DESC, e.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
  UNION
  MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_id, at)
  WHERE e.tenant_id = $tenant_id
    AND e.at >= $since AND e.at <= $until
    AND e.at <= $before_at AND CASE WHEN e.at = $before_at THEN e.id < $before_id ELSE true END
    AND ($application_id IS NULL OR e.application_id = $application_id)
    AND ($operation IS NULL OR e.operation = $operation)
    AND ($outcome IS NULL OR e.outcome = $outcome)
  WITH e ORDER BY e.tenant_id DESC, e.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
}
WITH e ORDER BY e.at DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
