// Tokens: one live token per (tenant, id); deleted tokens are relabelled :DeletedToken, so an id
// can be reused while the audit reference stays.
CREATE CONSTRAINT token_tenant_id IF NOT EXISTS
  FOR (t:Token) REQUIRE (t.tenant_id, t.id) IS UNIQUE;
// Type filters and dedup lookups are index seeks.
CREATE INDEX token_tenant_type IF NOT EXISTS FOR (t:Token) ON (t.tenant_id, t.type);
CREATE INDEX token_fingerprint IF NOT EXISTS
  FOR (t:Token) ON (t.tenant_id, t.type, t.fingerprint);
// The expiry sweeper seeks expired tokens by time.
CREATE INDEX token_expires_at IF NOT EXISTS FOR (t:Token) ON (t.expires_at);
// Metadata filters: one node per (tenant, lower-cased key=value), shared by the tokens that carry it.
CREATE CONSTRAINT meta_tenant_kv IF NOT EXISTS FOR (m:Meta) REQUIRE (m.tenant_id, m.kv) IS UNIQUE;
// Dedup creates serialise on one lock node per (tenant, type, fingerprint).
CREATE CONSTRAINT dedup_lock IF NOT EXISTS
  FOR (l:DedupLock) REQUIRE (l.tenant_id, l.type, l.fingerprint) IS UNIQUE;
CREATE INDEX deleted_token_tenant_id IF NOT EXISTS FOR (d:DeletedToken) ON (d.tenant_id, d.id);
