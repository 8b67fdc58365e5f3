// Create a token (optionally under a parent, optionally deduplicated) in one statement.
// $parent_id: when set, the parent must be live and readable ($parent_prefixes), else no row.
// $dedup: when true, serialise on the (tenant, type, fingerprint) lock and return an existing
// live token of that fingerprint instead of creating one.
OPTIONAL MATCH (p:Token {tenant_id: $tenant_id, id: $parent_id})
  WHERE (p.expires_at IS NULL OR p.expires_at > datetime())
    AND any(c IN p.containers WHERE any(pre IN $parent_prefixes WHERE c STARTS WITH pre))
WITH p WHERE $parent_id IS NULL OR p IS NOT NULL
CALL (p) {
  WITH p WHERE $dedup
  MERGE (l:DedupLock {tenant_id: $tenant_id, type: $props.type, fingerprint: $props.fingerprint})
  SET l.locked_at = datetime()
  WITH l
  OPTIONAL MATCH (e:Token {tenant_id: $tenant_id, type: $props.type,
                           fingerprint: $props.fingerprint})
    WHERE e.expires_at IS NULL OR e.expires_at > datetime()
  WITH e ORDER BY e.created_at LIMIT 1
  RETURN e AS existing
  UNION
  WITH p WHERE NOT $dedup
  RETURN null AS existing
}
FOREACH (_ IN CASE WHEN existing IS NULL THEN [1] ELSE [] END |
  CREATE (t:Token {tenant_id: $tenant_id, id: $id})
  SET t += $props, t.created_at = datetime(), t.expires_at = $expires_at
  FOREACH (kv IN $meta_kvs |
    MERGE (m:Meta {tenant_id: $tenant_id, kv: kv})
    CREATE (t)-[:HAS_META]->(m))
)
WITH p, existing
OPTIONAL MATCH (created:Token {tenant_id: $tenant_id, id: $id}) WHERE existing IS NULL
FOREACH (_ IN CASE WHEN p IS NOT NULL AND created IS NOT NULL THEN [1] ELSE [] END |
  MERGE (p)-[r:PARENT_OF]->(created) ON CREATE SET r.created_at = datetime())
WITH coalesce(existing, created) AS t, existing IS NOT NULL AS deduplicated
RETURN properties(t) AS token, deduplicated
