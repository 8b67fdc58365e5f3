// Seek for `metadata.<key>:X`: the HAS_META self-loops (tokens/list_by_metadata) by
// (tenant_id, kv) in the token_meta relationship index; $value is the lower-cased key U+001F value.
// `token_id IS NOT NULL` (always true) lets the planner seek the three-property index.
MATCH (t:Token)-[m:HAS_META]->(t) USING INDEX SEEK m:HAS_META(tenant_id, kv, token_id)
WHERE m.tenant_id = $tenant_id AND m.kv = $value AND m.token_id IS NOT NULL
RETURN t
