// Seek for `ancestor:X` (tokens with X among their ancestors: X's descendants, 1 to 5 links
// down): X by its unique id, then down its child links. X and every token on the way must be
// visible to the caller: nothing is found through a token it may not read (as graph/traverse).
MATCH (a:Token {tenant_id: $tenant_id, id: $value}) USING INDEX SEEK a:Token(tenant_id, id)
WHERE @visible(a)
MATCH (a) ((:Token)-[:PARENT_OF]->(n:Token WHERE n.tenant_id = $tenant_id
    AND @visible(n))){1,5} (t)
RETURN DISTINCT t
