// Seek for `data:X`: the blind index. Each value a token's search_indexes expressions produce is
// stored only as a keyed HMAC on a HAS_INDEX self-loop {tenant_id, digest, token_id}, found by
// (tenant_id, digest) in the token_search_index relationship index; $value is the HMAC of X.
// `token_id IS NOT NULL` (always true) lets the planner seek the three-property index.
MATCH (t:Token)-[x:HAS_INDEX]->(t) USING INDEX SEEK x:HAS_INDEX(tenant_id, digest, token_id)
WHERE x.tenant_id = $tenant_id AND x.digest = $value AND x.token_id IS NOT NULL
RETURN t
