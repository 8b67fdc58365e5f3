// Search (search/*): every term form is a seek. Blind index of `data` terms: one HAS_INDEX
// self-loop per search index value {tenant_id, digest (keyed HMAC), token_id}; they live and die
// with their token, like the HAS_META entries.
CREATE INDEX token_search_index IF NOT EXISTS
  FOR ()-[x:HAS_INDEX]-() ON (x.tenant_id, x.digest, x.token_id);
// `fingerprint:` without a type (token_fingerprint starts with the type).
CREATE INDEX token_tenant_fingerprint IF NOT EXISTS FOR (t:Token) ON (t.tenant_id, t.fingerprint);
// Date ranges, per tenant (token_expires_at is the sweeper's, across tenants).
CREATE INDEX token_tenant_created_at IF NOT EXISTS FOR (t:Token) ON (t.tenant_id, t.created_at);
CREATE INDEX token_tenant_expires_at IF NOT EXISTS FOR (t:Token) ON (t.tenant_id, t.expires_at);
