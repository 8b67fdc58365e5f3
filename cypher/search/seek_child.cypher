// Seek for `child:X` (tokens with child X): X by its unique id, then its parent links. X must be
// visible to the caller, or nothing is found.
MATCH (t:Token)-[:PARENT_OF]->(k:Token {tenant_id: $tenant_id, id: $value})
  USING INDEX SEEK k:Token(tenant_id, id)
WHERE @visible(k)
RETURN t
