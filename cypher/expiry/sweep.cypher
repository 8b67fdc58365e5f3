// Delete every expired token exactly as tokens/delete does: data, mask, metadata entries (HAS_META
// self-loops, hence DISTINCT) and links go; the node becomes a :DeletedToken audit reference
// (deleted_reason $reason, deleted_by $actor).
// - found through the token_expires_at range index (`expires_at < now` is a range seek);
// - at most $limit tokens per statement (the sweeper runs it again while it finds that many), so
//   one statement stays well inside the server's transaction timeout whatever the backlog;
// - $batch rows per inner transaction: memory and lock time stay bounded whatever the backlog,
//   and each batch commits on its own (IN TRANSACTIONS needs an auto-commit statement);
// - each token's label and expiry are re-read under its write lock (reads there see the
//   committed state): one already swept by another replica, deleted or merged away is skipped,
//   not deleted twice and not counted; one whose expiry a PATCH extended while the sweep
//   waited for its lock (the PATCH locked it while it was still live) is kept;
// - a batch that fails (a deadlock with a request, say) is skipped, counted in `failed`, and its
//   tokens are found again by the next sweep;
// - a fingerprint no token holds any more lets its dedup lock go (@release_dedup_lock);
// - each swept token leaves its audit event (application "system") in the same inner transaction
//   as its deletion, pending until the sweeper links the returned events into its chain; its
//   time is stored as audit events hold it, microseconds since 1970 (docs/adr/0028), which is
//   what the event is signed with (linking leaves a stored time as is);
// - and its webhook event (@outbox, cypher/fragments/), in that same inner transaction.
MATCH (t:Token)
WHERE t.expires_at < datetime()
WITH t LIMIT $limit
CALL (t) {
  SET t._lock = true
  REMOVE t._lock
  WITH t, t.fingerprint AS fingerprint WHERE t:Token AND t.expires_at < datetime()
  WITH t, fingerprint, {event_id: randomUUID(), type: "token.deleted", at: datetime(),
       tenant_id: t.tenant_id, token_id: t.id, token_type: t.type, containers: t.containers,
       application_id: "system", reason: "expired"} AS webhook_event
  CALL (t) {
    MATCH (t)-[r]-()
    WITH DISTINCT r
    DELETE r
  }
  REMOVE t:Token
  SET t:DeletedToken
  SET t = {tenant_id: t.tenant_id, id: t.id, type: t.type, created_by: t.created_by,
           created_at: t.created_at, deleted_at: datetime(), deleted_by: $actor,
           deleted_reason: $reason, merged_into: null}
  WITH t, fingerprint, webhook_event
  @release_dedup_lock(t, fingerprint)
  @outbox(webhook_event)
  CREATE (e:AuditEvent:PendingAuditEvent {
           id: randomUUID(), at: datetime().epochSeconds * 1000000 + datetime().microsecond,
           tenant_id: t.tenant_id,
           application_id: $event.application_id, operation: $event.operation,
           trace_id: $event.trace_id, token_ids: [t.id], outcome: "success", status: 204,
           reason: $reason, pending: true})
  RETURN e {.*} AS event
} IN TRANSACTIONS OF $batch ROWS ON ERROR CONTINUE REPORT STATUS AS status
RETURN event, status.committed AS committed, status.transactionId AS batch
