// Seek for `data:X`: the blind index. Each value a token's search_indexes expressions produce is
// stored only as a keyed HMAC on a HAS_INDEX self-loop {tenant_id, digest, token_id}, found by
// (tenant_id, digest) in the token_search_index relationship index; $value is the HMAC of X.
MATCH (t:Token)-[x:HAS_INDEX]->(t)
WHERE x.tenant_id = $tenant_id AND x.digest = $value
RETURN t
