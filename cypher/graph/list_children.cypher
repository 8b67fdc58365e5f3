// A page of a readable live token's readable live children, in child id order (spec §4.9).
// One row when the parent is visible (its `tokens` may be empty), none when it is not (404):
// children the caller may not read, and expired ones, are left out rather than refused.
// Live = NOT coalesce(expires_at <= now, false): the `IS NULL OR > now` form lets the planner
// union a range scan of every future-expiring token (all tenants) into a unique-id lookup.
MATCH (s:Token {tenant_id: $tenant_id, id: $id})
WHERE NOT coalesce(s.expires_at <= datetime(), false)
  AND any(c IN s.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
RETURN COLLECT {
  MATCH (s)-[:PARENT_OF]->(t:Token)
  WHERE t.tenant_id = $tenant_id
    AND t.id > $after
    AND NOT coalesce(t.expires_at <= datetime(), false)
    AND any(c IN t.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
    AND ($ids IS NULL OR t.id IN $ids)
    AND ($types IS NULL OR t.type IN $types)
  WITH t ORDER BY t.id LIMIT $limit
  RETURN properties(t)
} AS tokens
