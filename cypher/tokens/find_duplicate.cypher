// Inside an update with dedup on: serialise on the fingerprint lock, then find the oldest other
// live token of the same tenant, type and fingerprint.
// Live = NOT coalesce(expires_at <= now, false): see tokens/list.
MERGE (l:DedupLock {tenant_id: $tenant_id, type: $type, fingerprint: $fingerprint})
SET l.locked_at = datetime()
WITH l
MATCH (e:Token {tenant_id: $tenant_id, type: $type, fingerprint: $fingerprint})
WHERE e.id <> $id AND NOT coalesce(e.expires_at <= datetime(), false)
RETURN properties(e) AS token
ORDER BY e.created_at
LIMIT 1
