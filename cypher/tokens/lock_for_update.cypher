// Lock a live token the caller may update (its containers under $prefixes) and return it:
// the write lock is held until the update transaction commits, so no update is lost.
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE (t.expires_at IS NULL OR t.expires_at > datetime())
  AND any(c IN t.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
SET t.version = coalesce(t.version, 0) + 1
RETURN properties(t) AS token
