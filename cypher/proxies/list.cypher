// One page in the stable (created_at, id) order after the cursor; the (tenant_id, created_at) index seeks it.
MATCH (p:Proxy)
WHERE p.tenant_id = $tenant_id AND p.created_at >= datetime($after_at)
  AND (p.created_at > datetime($after_at) OR p.id > $after_id)
RETURN p {.id, .name, .destination_url, .description, .header_allowlist, .created_at,
          .created_by, .modified_at} AS proxy,
       toString(p.created_at) AS position
ORDER BY p.created_at, p.id
LIMIT $limit
