// Seek for `child:X` (tokens with child X): X by its unique id, then its parent links. X must be
// visible to the caller, or nothing is found.
MATCH (t:Token)-[:PARENT_OF]->(k:Token {tenant_id: $tenant_id, id: $value})
WHERE NOT coalesce(k.expires_at <= datetime(), false)
  AND any(c IN k.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
RETURN t
