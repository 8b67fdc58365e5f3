// Delete a live token the caller may delete: its data, metadata entries and links go, an audit
// reference stays (label :DeletedToken, so the id may be reused by a new token).
// @visible/@live/@in_prefixes: cypher/fragments/ (expanded when the catalog loads).
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE @visible(t)
CALL (t) {
  MATCH (t)-[r]-()
  WITH DISTINCT r
  DELETE r
}
REMOVE t:Token
WITH t
CALL (t) {
  // Its dedup lock goes with the last token holding its fingerprint: a deleted token keeps no
  // fingerprint, and the lock (tenant, type, fingerprint) would keep it for ever otherwise.
  MATCH (l:DedupLock {tenant_id: t.tenant_id, type: t.type, fingerprint: t.fingerprint})
  WHERE NOT EXISTS { MATCH (o:Token {tenant_id: t.tenant_id, type: t.type,
                                     fingerprint: t.fingerprint}) }
  DELETE l
}
SET t:DeletedToken
SET t = {tenant_id: t.tenant_id, id: t.id, type: t.type, created_by: t.created_by,
         created_at: t.created_at, deleted_at: datetime(), deleted_by: $actor,
         deleted_reason: $reason, merged_into: $merged_into}
RETURN t.id AS id
