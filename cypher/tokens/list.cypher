// A page of the tenant's readable live tokens in id order, no filters: a range seek on the
// (tenant_id, id) index, read in index order, so a page costs its size however many tokens the
// tenant holds (ORDER BY names both index properties so the planner keeps the index order and
// needs no sort).
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
MATCH (t:Token)
WHERE t.tenant_id = $tenant_id AND t.id > $after
  AND @visible(t)
WITH t ORDER BY t.tenant_id, t.id
LIMIT $limit
RETURN collect(@token(t)) AS tokens
