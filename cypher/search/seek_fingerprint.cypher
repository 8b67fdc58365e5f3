// Seek for `fingerprint:X`: the token_tenant_fingerprint index (schema/004_search).
MATCH (t:Token) USING INDEX SEEK t:Token(tenant_id, fingerprint)
WHERE t.tenant_id = $tenant_id AND t.fingerprint = $value
RETURN t
