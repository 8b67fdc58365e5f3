// One live token the caller may read (its containers under one of $prefixes).
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE (t.expires_at IS NULL OR t.expires_at > datetime())
  AND any(c IN t.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
RETURN properties(t) AS token
