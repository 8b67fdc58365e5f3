// Tokens: one live token per (tenant, id); deleted tokens are relabelled :DeletedToken, so an id
// can be reused while the audit reference stays. This constraint's index also serves the plain
// listing (range seek on id, read in id order).
CREATE CONSTRAINT token_tenant_id IF NOT EXISTS
  FOR (t:Token) REQUIRE (t.tenant_id, t.id) IS UNIQUE;
// Type filters: a seek per type, read in id order (a page reads at most its size per type).
CREATE INDEX token_tenant_type_id IF NOT EXISTS FOR (t:Token) ON (t.tenant_id, t.type, t.id);
// Dedup lookups.
CREATE INDEX token_fingerprint IF NOT EXISTS
  FOR (t:Token) ON (t.tenant_id, t.type, t.fingerprint);
// The expiry sweeper seeks expired tokens by time.
CREATE INDEX token_expires_at IF NOT EXISTS FOR (t:Token) ON (t.expires_at);
// Metadata filters: one HAS_META self-loop per entry {tenant_id, kv (lower-cased key U+001F
// lower-cased value), token_id}; a filter is a seek on (tenant_id, kv) read in token_id order.
// The entries live and die with their token: nothing of a deleted token's metadata remains.
CREATE INDEX token_meta IF NOT EXISTS
  FOR ()-[m:HAS_META]-() ON (m.tenant_id, m.kv, m.token_id);
// Dedup creates serialise on one lock node per (tenant, type, fingerprint).
CREATE CONSTRAINT dedup_lock IF NOT EXISTS
  FOR (l:DedupLock) REQUIRE (l.tenant_id, l.type, l.fingerprint) IS UNIQUE;
CREATE INDEX deleted_token_tenant_id IF NOT EXISTS FOR (d:DeletedToken) ON (d.tenant_id, d.id);
