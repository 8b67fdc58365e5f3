// A page of the tenant's readable live tokens in id order: a range seek on (tenant_id, id).
MATCH (t:Token)
WHERE t.tenant_id = $tenant_id
  AND t.id > $after
  AND (t.expires_at IS NULL OR t.expires_at > datetime())
  AND any(c IN t.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
  AND ($types IS NULL OR t.type IN $types)
  AND ($ids IS NULL OR t.id IN $ids)
  AND all(kv IN $meta_kvs WHERE EXISTS { (t)-[:HAS_META]->(:Meta {tenant_id: $tenant_id, kv: kv}) })
RETURN properties(t) AS token
ORDER BY t.id
LIMIT $limit
