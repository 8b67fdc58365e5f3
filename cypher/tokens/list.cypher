// A page of the tenant's readable live tokens in id order, no filters: a range seek on the
// (tenant_id, id) index, read in index order, so a page costs its size however many tokens the
// tenant holds (ORDER BY names both index properties so the planner keeps the index order and
// needs no sort).
// Live = NOT coalesce(expires_at <= now, false): the `IS NULL OR > now` form lets the planner
// union a range scan of every future-expiring token (all tenants) into the seek.
MATCH (t:Token)
WHERE t.tenant_id = $tenant_id AND t.id > $after
  AND NOT coalesce(t.expires_at <= datetime(), false)
  AND any(c IN t.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
WITH t ORDER BY t.tenant_id, t.id
LIMIT $limit
RETURN properties(t) AS token
