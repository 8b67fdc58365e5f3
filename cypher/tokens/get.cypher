// One live token the caller may read (its containers under one of $prefixes).
// Live = NOT coalesce(expires_at <= now, false): see tokens/list.
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE NOT coalesce(t.expires_at <= datetime(), false)
  AND any(c IN t.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
RETURN properties(t) AS token
