// @create_row(row): one row's token created as tokens/create creates one, in a statement that
// unwinds rows (tokens/create_many, tokens/create_batch). `row` is a map {index, id, props,
// expires_at, meta_kvs, dedup, index_digests, tenant_id, parent_id (absent or null: no
// parent; the statement links the child to it)}; the statement gives $expired_actor
// and $expired_reason. Dedup lock and match, an expired holder of the id retired as the sweeper
// retires it (its dedup lock included), HAS_META and HAS_INDEX self-loops, the webhook event
// (@outbox) of each change. The subquery runs row by row and sees the rows before it, so two
// rows of one statement dedup against each other.
// A holder of the id is write-locked (SET on the null of no holder does nothing) and read under
// the lock: an expired one a PATCH extended meanwhile is live, and its row answers `taken`; one
// a delete or sweep retired meanwhile is no longer a :Token and is left as it is. The lock is
// in the row itself, not in a subquery: a property read after a subquery could be the value
// cached before it. An id held by a live token answers `taken` on its row instead of failing
// the statement (the other rows still commit); a create racing this one for the same id can
// still fail it on the uniqueness constraint.
// Rows out: {t (the token, or null when taken), deduplicated, taken}.
CALL ({node}) {
  CALL ({node}) {
    WITH {node} WHERE {node}.dedup
    MERGE (l:DedupLock {tenant_id: {node}.tenant_id, type: {node}.props.type,
                        fingerprint: {node}.props.fingerprint})
    SET l.locked_at = datetime()
    WITH l
    OPTIONAL MATCH (e:Token {tenant_id: {node}.tenant_id, type: {node}.props.type,
                             fingerprint: {node}.props.fingerprint})
      WHERE @live(e)
    WITH e ORDER BY e.created_at LIMIT 1
    RETURN e AS existing
    UNION
    WITH {node} WHERE NOT {node}.dedup
    RETURN null AS existing
  }
  OPTIONAL MATCH (old:Token {tenant_id: {node}.tenant_id, id: {node}.id}) WHERE existing IS NULL
  SET old._lock = true
  REMOVE old._lock
  WITH {node}, existing, old, old.fingerprint AS fingerprint,
       old IS NOT NULL AND old:Token AND @live(old) AS taken
  CALL (old, taken, fingerprint) {
    WITH old, fingerprint, old.containers AS containers WHERE old IS NOT NULL AND old:Token AND NOT taken
    CALL (old) {
      MATCH (old)-[r]-()
      WITH DISTINCT r
      DELETE r
    }
    REMOVE old:Token
    SET old:DeletedToken
    SET old = {tenant_id: old.tenant_id, id: old.id, type: old.type, created_by: old.created_by,
               created_at: old.created_at, deleted_at: datetime(), deleted_by: $expired_actor,
               deleted_reason: $expired_reason, merged_into: null}
    WITH old, fingerprint, containers
    @release_dedup_lock(old, fingerprint)
    WITH old, fingerprint, {event_id: randomUUID(), type: "token.deleted", at: datetime(),
         tenant_id: old.tenant_id, token_id: old.id, token_type: old.type,
         containers: containers, application_id: "system", reason: "expired"} AS webhook_event
    @outbox(webhook_event)
  }
  FOREACH (_ IN CASE WHEN existing IS NULL AND NOT taken THEN [1] ELSE [] END |
    CREATE (t:Token {tenant_id: {node}.tenant_id, id: {node}.id})
    SET t += {node}.props, t.created_at = datetime(), t.expires_at = datetime({node}.expires_at)
    FOREACH (kv IN {node}.meta_kvs |
      CREATE (t)-[:HAS_META {tenant_id: {node}.tenant_id, kv: kv, token_id: {node}.id}]->(t))
    FOREACH (digest IN {node}.index_digests |
      CREATE (t)-[:HAS_INDEX {tenant_id: {node}.tenant_id, digest: digest, token_id: {node}.id}]->(t))
  )
  WITH {node}, existing, taken
  OPTIONAL MATCH (created:Token {tenant_id: {node}.tenant_id, id: {node}.id})
    WHERE existing IS NULL AND NOT taken
  WITH {node}, existing, taken, created, CASE WHEN created IS NOT NULL THEN {
         event_id: randomUUID(), type: "token.created", at: datetime(),
         tenant_id: created.tenant_id, token_id: created.id, token_type: created.type,
         containers: created.containers, application_id: created.created_by,
         parent_id: {node}.parent_id} END AS webhook_event
  @outbox(webhook_event)
  RETURN coalesce(existing, created) AS t, existing IS NOT NULL AS deduplicated, taken
}
