// One page in the stable (created_at, id) order after the cursor; the (tenant_id, created_at) index seeks it.
MATCH (a:Application)
WHERE a.tenant_id = $tenant_id AND a.created_at >= datetime($after_at)
  AND (a.created_at > datetime($after_at) OR a.id > $after_id)
  AND a.deleted_at IS NULL
RETURN a {.id, .tenant_id, .name, .permissions, .rules, .created_at, .created_by, .modified_at}
       AS application,
       toString(a.created_at) AS position
ORDER BY a.created_at, a.id
LIMIT $limit
