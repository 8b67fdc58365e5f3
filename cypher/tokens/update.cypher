// Write the merged token, only if it is still as the update read it, and replace its
// metadata entries (HAS_META self-loops, see tokens/list_by_metadata) and search index values
// (HAS_INDEX self-loops, see search/seek_data). $expires_at: ISO-8601 text or null, as in
// tokens/create. A fingerprint the update replaced lets its dedup lock go
// (@release_dedup_lock, cypher/fragments/).
// The update read the token without its lock (tokens/get), or under it (tokens/lock_for_update,
// earlier in this transaction). The write lock is taken first; then, under it, where reads see
// the committed state, the token must still be visible and live (@visible/@live/@in_prefixes,
// cypher/fragments/) and hold the data ciphertext it was read with ($read_data_ct). That
// ciphertext stands for the whole token as read: every write of a live token's properties
// (a create, an update) encrypts its data again under a new nonce, and every other writer
// (a delete, a dedup merge, the expiry sweep) retires the token. No row: the token changed,
// went or expired meanwhile, and the update runs again under the lock.
// Inside a request the audit prefix is sent where the AUDIT_HERE line below says, not in front:
// only a statement that writes the token stores the request's event (none that found it
// changed). Nothing after that line may drop the row.
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE @visible(t)
SET t._lock = true
REMOVE t._lock
WITH t WHERE t:Token AND @visible(t) AND t.data_ct = $read_data_ct
// The audit prefix goes here (repository/audit_prefix.py AUDIT_HERE).
WITH t, t.fingerprint AS was
SET t += $props, t.modified_at = datetime(), t.expires_at = datetime($expires_at)
WITH t, was
@release_dedup_lock(t, was)
WITH t
CALL (t) {
  MATCH (t)-[r:HAS_META|HAS_INDEX]->(t)
  DELETE r
}
FOREACH (kv IN $meta_kvs |
  CREATE (t)-[:HAS_META {tenant_id: $tenant_id, kv: kv, token_id: t.id}]->(t))
FOREACH (digest IN $index_digests |
  CREATE (t)-[:HAS_INDEX {tenant_id: $tenant_id, digest: digest, token_id: t.id}]->(t))
// The webhook outbox (@outbox, cypher/fragments/): committed with the update.
WITH t, {event_id: randomUUID(), type: "token.updated", at: datetime(), tenant_id: t.tenant_id,
         token_id: t.id, token_type: t.type, containers: t.containers,
         application_id: t.modified_by} AS webhook_event
@outbox(webhook_event)
RETURN @token(t) AS token
