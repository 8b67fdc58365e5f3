// Seek for `type:X`: the token_tenant_type_id index (a composite index serves a seek only when
// each of its properties has a predicate: hence `id IS NOT NULL`, true of every token).
MATCH (t:Token) USING INDEX SEEK t:Token(tenant_id, type, id)
WHERE t.tenant_id = $tenant_id AND t.type = $value AND t.id IS NOT NULL
RETURN t
