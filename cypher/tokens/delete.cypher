// Delete a live token the caller may delete: its data, metadata entries and links go, an audit
// reference stays (label :DeletedToken, so the id may be reused by a new token).
// @visible/@live/@in_prefixes/@release_dedup_lock: cypher/fragments/ (expanded when the catalog
// loads).
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE @visible(t)
WITH t, t.fingerprint AS fingerprint
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
WITH t, fingerprint
@release_dedup_lock(t, fingerprint)
RETURN t.id AS id
