// One live token the caller may read (its containers under one of $prefixes).
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE @visible(t)
RETURN @token(t) AS token
