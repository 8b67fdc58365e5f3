// A page of the events that name one token, newest first. An event naming only that token
// holds it as a scalar: as integers (docs/adr/0026), a seek on (tenant_key, token_key, at)
// checked against the rest of both ids per event; as text (events stored before), a seek on
// (tenant_id, token_id, at). One naming several has an AUDIT_REF self-loop per token, holding
// the two keys and the token's rest: a seek on (tenant_key, token_key, at), checked against
// the rest of both ids (a token id that is no UUID has no rest: against the event's list,
// which holds such an id as its text; an event has one self-loop a (key, rest) pair, so it is
// at most one row); as text (every event stored before the scalar, and those naming several
// stored before the keys), a seek on (tenant_id, token_id, at). Each seek reads in index order
// and stops at a page; the newest of the pages (at most four times the page, sorted) are the
// page. A deleted token's events stay readable by its id.
// Each seek runs once per form of the time ($times: as integers, as events hold it since
// docs/adr/0028, then as DateTimes, as events stored before do; list.cypher), and the page is
// sorted by the instant whichever the form.
UNWIND $times AS t
CALL (t) {
  MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_key, token_key, at)
  WHERE e.tenant_key = $tenant_key
    AND e.token_key = $token_key
    AND e.at >= t.since AND e.at <= t.until
    AND e.at <= t.before AND CASE WHEN e.at = t.before THEN e.id < $before_id ELSE true END
    AND coalesce(e.tenant_rest = $tenant_rest, e.tenant_id = $tenant_id)
    AND coalesce(e.token_rest = $token_rest, e.token_id = $token_id)
    AND ($application_id IS NULL OR (e.application_key = $application_key
         AND coalesce(e.application_rest = $application_rest, e.application_id = $application_id)))
    AND ($operation IS NULL OR e.operation = $operation)
    AND ($outcome IS NULL OR e.outcome = $outcome)
  WITH e ORDER BY e.tenant_key DESC, e.token_key DESC, e.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
  UNION
  MATCH (e:AuditEvent) USING INDEX SEEK e:AuditEvent(tenant_id, token_id, at)
  WHERE e.tenant_id = $tenant_id
    AND e.token_id = $token_id
    AND e.at >= t.since AND e.at <= t.until
    AND e.at <= t.before AND CASE WHEN e.at = t.before THEN e.id < $before_id ELSE true END
    AND ($application_id IS NULL OR e.application_id = $application_id)
    AND ($operation IS NULL OR e.operation = $operation)
    AND ($outcome IS NULL OR e.outcome = $outcome)
  WITH e ORDER BY e.tenant_id DESC, e.token_id DESC, e.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
  UNION
  MATCH (e:AuditEvent)-[r:AUDIT_REF]->(e) USING INDEX SEEK r:AUDIT_REF(tenant_key, token_key, at)
  WHERE r.tenant_key = $tenant_key AND r.token_key = $token_key
    AND r.at >= t.since AND r.at <= t.until
    AND r.at <= t.before AND CASE WHEN r.at = t.before THEN e.id < $before_id ELSE true END
    AND coalesce(e.tenant_rest = $tenant_rest, e.tenant_id = $tenant_id)
    AND CASE WHEN r.token_rest IS NULL THEN $token_rest IS NULL AND $token_id IN e.token_ids
             ELSE r.token_rest = $token_rest END
    AND ($application_id IS NULL OR (e.application_key = $application_key
         AND coalesce(e.application_rest = $application_rest, e.application_id = $application_id)))
    AND ($operation IS NULL OR e.operation = $operation)
    AND ($outcome IS NULL OR e.outcome = $outcome)
  WITH e, r ORDER BY r.tenant_key DESC, r.token_key DESC, r.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
  UNION
  MATCH (e:AuditEvent)-[r:AUDIT_REF]->(e) USING INDEX SEEK r:AUDIT_REF(tenant_id, token_id, at)
  WHERE r.tenant_id = $tenant_id AND r.token_id = $token_id
    AND r.at >= t.since AND r.at <= t.until
    AND r.at <= t.before AND CASE WHEN r.at = t.before THEN e.id < $before_id ELSE true END
    AND ($application_id IS NULL OR coalesce(e.application_id = $application_id,
         e.application_key = $application_key AND e.application_rest = $application_rest))
    AND ($operation IS NULL OR e.operation = $operation)
    AND ($outcome IS NULL OR e.outcome = $outcome)
  WITH e, r ORDER BY r.tenant_id DESC, r.token_id DESC, r.at DESC, e.id DESC
  LIMIT $limit
  RETURN e
}
WITH e, CASE WHEN e.at IS :: INTEGER THEN e.at ELSE e.at.epochSeconds * 1000000 + e.at.microsecond END AS instant
ORDER BY instant DESC, e.id DESC
LIMIT $limit
RETURN collect(properties(e)) AS events
