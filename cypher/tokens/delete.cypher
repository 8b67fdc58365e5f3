// Delete a live token the caller may delete: its data, metadata entries and links go, an audit
// reference stays (label :DeletedToken, so the id may be reused by a new token).
// The token is write-locked first and checked again under the lock: a delete, dedup merge or
// sweep that committed while this one waited has already retired it, and its audit reference
// (deleted_by, deleted_reason, merged_into) is kept as written: no row (404), not a second
// retirement.
// Its webhook event (@outbox) is written in this same statement: reason "request", or
// "deduplicated" with `merged_into` for a dedup merge.
// @visible/@live/@in_prefixes/@release_dedup_lock/@outbox: cypher/fragments/ (expanded when the catalog
// loads).
// Inside a request, run alone, it is sent with the audit prefix in front (a merge runs it
// without): repository/audit_prefix.py; docs/architecture.md, "The audit prefix".
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE @visible(t)
SET t._lock = true
REMOVE t._lock
WITH t, t.fingerprint AS fingerprint WHERE t:Token AND @visible(t)
WITH t, fingerprint, {event_id: randomUUID(), type: "token.deleted", at: datetime(),
     tenant_id: t.tenant_id, token_id: t.id, token_type: t.type, containers: t.containers,
     application_id: $actor, merged_into: $merged_into,
     reason: CASE $reason WHEN "deleted" THEN "request" ELSE $reason END} AS webhook_event
CALL (t) {
  MATCH (t)-[r]-()
  WITH DISTINCT r
  DELETE r
}
REMOVE t:Token
SET t:DeletedToken
SET t = {tenant_id: t.tenant_id, id: t.id, type: t.type, created_by: t.created_by,
         created_at: t.created_at, deleted_at: datetime(), deleted_by: $actor,
         deleted_reason: $reason, merged_into: $merged_into}
WITH t, fingerprint, webhook_event
@release_dedup_lock(t, fingerprint)
@outbox(webhook_event)
RETURN t.id AS id
