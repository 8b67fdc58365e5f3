// Seek for `descendant:X` (tokens with X among their descendants: X's ancestors, 1 to 5 links
// up): X by its unique id, then up its parent links. X and every token on the way must be
// visible to the caller: nothing is found through a token it may not read (as graph/traverse).
MATCH (d:Token {tenant_id: $tenant_id, id: $value}) USING INDEX SEEK d:Token(tenant_id, id)
WHERE @visible(d)
MATCH (t) ((n:Token WHERE n.tenant_id = $tenant_id
    AND @visible(n))
    -[:PARENT_OF]->(:Token)){1,5} (d)
RETURN DISTINCT t
