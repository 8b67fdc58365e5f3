// A page of a readable live token's readable live children, in child id order.
// One row when the parent is visible (its `tokens` may be empty), none when it is not (404):
// children the caller may not read, and expired ones, are left out rather than refused.
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
MATCH (s:Token {tenant_id: $tenant_id, id: $id})
WHERE @visible(s)
RETURN COLLECT {
  MATCH (s)-[:PARENT_OF]->(t:Token)
  WHERE t.tenant_id = $tenant_id
    AND t.id > $after
    AND @visible(t)
    AND ($ids IS NULL OR t.id IN $ids)
    AND ($types IS NULL OR t.type IN $types)
  WITH t ORDER BY t.id LIMIT $limit
  RETURN @token(t)
} AS tokens
