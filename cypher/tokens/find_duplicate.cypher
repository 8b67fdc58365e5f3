// Inside an update with dedup on: serialise on the fingerprint lock, then find the oldest other
// live token of the same tenant, type and fingerprint.
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
MERGE (l:DedupLock {tenant_id: $tenant_id, type: $type, fingerprint: $fingerprint})
SET l.locked_at = datetime()
WITH l
MATCH (e:Token {tenant_id: $tenant_id, type: $type, fingerprint: $fingerprint})
WHERE e.id <> $id AND @live(e)
RETURN @token(e) AS token
ORDER BY e.created_at
LIMIT 1
