// A page of the tenant's events, newest first; the cursor is the (at, id) of the last event
// seen, and the other filters are checked per event. Events holding their ids as integers
// (docs/adr/0026, audit/ids.py) are sought on (tenant_key, outcome, at) read backwards, once for
// each outcome an event can have ($outcomes, audit/event.py OUTCOMES: a page of each, at most
// eight; an index on (tenant_key, at) alone took 80 bytes of store an event), each checked
// against the rest of the tenant's id (`coalesce`: the rest of a UUID, the text of any other
// id); events stored before, on (tenant_id, at). Each seek reads in index order and stops at a
// page; the newest of the pages, sorted, are the page. The cursor is one range on `at`
// (`<= t.before`) with the tie on `id` as a filter (a CASE, which the planner cannot split), so
// a seek reads in index order and stops at the page (ties of one instant sorted by id:
// PartialTop); an OR there made the planner union two seeks and sort every event of the tenant
// in the range, for each page. The hints keep these indexes whatever the statistics say (the
// other indexes on the tenant would sort). The other log statements follow the same shape on
// their own indexes. Events hold their time as an integer (microseconds since 1970,
// docs/adr/0028), those stored before as a DateTime; a range seek finds values of its bounds'
// type only, so every seek runs once per form ($times: the bounds as integers, then as
// DateTimes, repository/audit.py time_forms), and the page is sorted by the instant whichever
// the form.
UNWIND $times AS t
CALL (t) {
  UNWIND $outcomes AS outcome
  CALL (outcome, t) {
    MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_key, outcome, at)
    WHERE e.tenant_key = $tenant_key AND e.outcome = outcome
      AND e.at >= t.since AND e.at <= t.until
      AND e.at <= t.before AND CASE WHEN e.at = t.before THEN e.id < $before_id ELSE true END
      AND coalesce(e.tenant_rest = $tenant_rest, e.tenant_id = $tenant_id)
      AND ($application_id IS NULL OR (e.application_key = $application_key
           AND coalesce(e.application_rest = $application_rest, e.application_id = $application_id)))
      AND ($operation IS NULL OR e.operation = $operation)
    WITH e ORDER BY e.tenant_key DESC, e.outcome DESC, e.at DESC, e.id DESC
    LIMIT $limit
    RETURN e
  }
  RETURN e
  UNION
  MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_id, at)
  WHERE e.tenant_id = $tenant_id
    AND e.at >= t.since AND e.at <= t.until
    AND e.at <= t.before AND CASE WHEN e.at = t.before THEN e.id < $before_id ELSE true END
    AND ($application_id IS NULL OR e.application_id = $application_id)
    AND ($operation IS NULL OR e.operation = $operation)
    AND ($outcome IS NULL OR e.outcome = $outcome)
  WITH e ORDER BY e.tenant_id DESC, e.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
}
WITH e, CASE WHEN e.at IS :: INTEGER THEN e.at ELSE e.at.epochSeconds * 1000000 + e.at.microsecond END AS instant
ORDER BY instant DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
