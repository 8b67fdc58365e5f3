// Create a token (optionally under a parent, optionally deduplicated) in one statement.
// $parent_id: when set, the parent must be live and readable ($parent_prefixes), else no row.
// The parent is write-locked and then checked again (reads under the lock see the committed
// state): a parent deleted, merged away or swept while this statement waited gets no child.
// $dedup: when true, serialise on the (tenant, type, fingerprint) lock and return an existing
// live token of that fingerprint instead of creating one.
// An expired token that still holds $id (the sweeper has not reached it yet) is retired here
// exactly as the sweeper retires it, its dedup lock included: expired tokens are gone to
// callers, so their ids are free (a 409 would tell that the expired token exists). It is
// write-locked first and its expiry read again under the lock: a PATCH that extended it, or a
// delete or sweep that retired it, while this statement waited is not undone (an extended token
// holds the id: the create then fails on the uniqueness constraint, 409).
// Metadata entries are HAS_META self-loops (see tokens/list_by_metadata); search index values are
// HAS_INDEX self-loops holding their keyed HMAC (see search/seek_data).
// $expires_at arrives as ISO-8601 text or null (repository/records.py datetime_text) and is
// stored as the DateTime it names.
// Each change writes its webhook event (@outbox) in this same statement.
// @visible/@live/@in_prefixes/@token/@release_dedup_lock/@outbox: cypher/fragments/ (expanded when the
// catalog loads).
// Inside a request it is sent with the audit prefix in front (repository/audit_prefix.py;
// docs/architecture.md, "The audit prefix").
OPTIONAL MATCH (p:Token {tenant_id: $tenant_id, id: $parent_id})
  WHERE @visible(p, parent_prefixes)
SET p._lock = true
REMOVE p._lock
WITH p WHERE $parent_id IS NULL OR (p:Token AND @visible(p, parent_prefixes))
CALL (p) {
  WITH p WHERE $dedup
  MERGE (l:DedupLock {tenant_id: $tenant_id, type: $props.type, fingerprint: $props.fingerprint})
  SET l.locked_at = datetime()
  WITH l
  OPTIONAL MATCH (e:Token {tenant_id: $tenant_id, type: $props.type,
                           fingerprint: $props.fingerprint})
    WHERE @live(e)
  WITH e ORDER BY e.created_at LIMIT 1
  RETURN e AS existing
  UNION
  WITH p WHERE NOT $dedup
  RETURN null AS existing
}
CALL (existing) {
  // The hint: by id, never by a range over the expiry index, whatever the statistics say.
  OPTIONAL MATCH (old:Token {tenant_id: $tenant_id, id: $id})
    USING INDEX SEEK old:Token(tenant_id, id)
    WHERE existing IS NULL AND old.expires_at <= datetime()
  WITH old WHERE old IS NOT NULL
  SET old._lock = true
  REMOVE old._lock
  WITH old, old.fingerprint AS fingerprint, old.containers AS containers
  WHERE old:Token AND old.expires_at <= datetime()
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
       tenant_id: old.tenant_id, token_id: old.id, token_type: old.type, containers: containers,
       application_id: "system", reason: "expired"} AS webhook_event
  @outbox(webhook_event)
}
FOREACH (_ IN CASE WHEN existing IS NULL THEN [1] ELSE [] END |
  CREATE (t:Token {tenant_id: $tenant_id, id: $id})
  SET t += $props, t.created_at = datetime(), t.expires_at = datetime($expires_at)
  FOREACH (kv IN $meta_kvs |
    CREATE (t)-[:HAS_META {tenant_id: $tenant_id, kv: kv, token_id: $id}]->(t))
  FOREACH (digest IN $index_digests |
    CREATE (t)-[:HAS_INDEX {tenant_id: $tenant_id, digest: digest, token_id: $id}]->(t))
)
WITH p, existing
OPTIONAL MATCH (created:Token {tenant_id: $tenant_id, id: $id}) WHERE existing IS NULL
WITH p, existing, coalesce(existing, created) AS t
// Under a parent, the child is linked; a dedup match is linked too when the caller could link
// it by hand (it may read it), and never to itself.
FOREACH (_ IN CASE WHEN p IS NOT NULL AND t IS NOT NULL AND p <> t AND (existing IS NULL
    OR @in_prefixes(t, parent_prefixes))
  THEN [1] ELSE [] END |
  MERGE (p)-[r:PARENT_OF]->(t) ON CREATE SET r.created_at = datetime())
WITH t, existing IS NOT NULL AS deduplicated
// The webhook outbox (@outbox): a token created (not a dedup match), in this transaction.
WITH t, deduplicated, CASE WHEN t IS NOT NULL AND NOT deduplicated THEN {
       event_id: randomUUID(), type: "token.created", at: datetime(), tenant_id: t.tenant_id,
       token_id: t.id, token_type: t.type, containers: t.containers,
       application_id: t.created_by, parent_id: $parent_id} END AS webhook_event
@outbox(webhook_event)
RETURN @token(t) AS token, deduplicated
