// Lock a live token the caller may update (its containers under $prefixes) and return it:
// the write lock is taken before any property is read and held until the update transaction
// commits, so concurrent updates of one token run one after another and none is lost.
// Live = NOT coalesce(expires_at <= now, false): see tokens/list.
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE NOT coalesce(t.expires_at <= datetime(), false)
  AND any(c IN t.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
SET t._lock = true
REMOVE t._lock
WITH t
RETURN properties(t) AS token
