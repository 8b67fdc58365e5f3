// A merge patch of a proxy's fields: each is replaced whole (a null removes it), so no read is needed first.
MATCH (p:Proxy {tenant_id: $tenant_id, id: $id})
SET p += $changes, p.modified_at = datetime(), p.modified_by = $modified_by
RETURN p {.id, .name, .destination_url, .description, .header_allowlist, .created_at,
          .created_by, .modified_at} AS proxy
