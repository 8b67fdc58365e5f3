// Seek for `parent:X` (tokens whose parent is X): X by its unique id, then its child links. X
// must be visible to the caller, or nothing is found (its links tell nothing of it).
MATCH (p:Token {tenant_id: $tenant_id, id: $value})-[:PARENT_OF]->(t:Token)
  USING INDEX SEEK p:Token(tenant_id, id)
WHERE @visible(p)
RETURN t
