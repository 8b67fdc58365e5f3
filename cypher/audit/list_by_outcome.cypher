// A page of events of one outcome, newest first: a seek on (tenant_key, outcome, at).
// Events hold the ids as integers (docs/adr/0026, audit/ids.py): the first branch seeks on the
// tenant's key and checks the rest of its id per event (`coalesce`: the rest of a UUID, the text
// of any other id); the second seeks on the ids' text, for events stored before. Each branch reads
// in index order and stops at a page; the newest of the two pages are the page.
// Each seek runs once per form of the time ($times: as integers, as events hold it since
// docs/adr/0028, then as DateTimes, as events stored before do; list.cypher), and the page is
// sorted by the instant whichever the form.
UNWIND $times AS t
CALL (t) {
  MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_key, outcome, at)
  WHERE e.tenant_key = $tenant_key
    AND e.outcome = $outcome
    AND e.at >= t.since AND e.at <= t.until
    AND e.at <= t.before AND CASE WHEN e.at = t.before THEN e.id < $before_id ELSE true END
    AND coalesce(e.tenant_rest = $tenant_rest, e.tenant_id = $tenant_id)
    AND ($application_id IS NULL OR (e.application_key = $application_key
         AND coalesce(e.application_rest = $application_rest, e.application_id = $application_id)))
    AND ($operation IS NULL OR e.operation = $operation)
  WITH e ORDER BY e.tenant_key DESC, e.outcome DESC, e.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
  UNION
  MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_id, outcome, at)
  WHERE e.tenant_id = $tenant_id
    AND e.outcome = $outcome
    AND e.at >= t.since AND e.at <= t.until
    AND e.at <= t.before AND CASE WHEN e.at = t.before THEN e.id < $before_id ELSE true END
    AND ($application_id IS NULL OR e.application_id = $application_id)
    AND ($operation IS NULL OR e.operation = $operation)
  WITH e ORDER BY e.tenant_id DESC, e.outcome DESC, e.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
}
WITH e, CASE WHEN e.at IS :: INTEGER THEN e.at ELSE e.at.epochSeconds * 1000000 + e.at.microsecond END AS instant
ORDER BY instant DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
