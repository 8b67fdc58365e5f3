// One proxy of the caller's tenant: another tenant's reads as absent.
MATCH (p:Proxy {tenant_id: $tenant_id, id: $id})
RETURN p {.id, .name, .destination_url, .description, .header_allowlist, .created_at,
          .created_by, .modified_at} AS proxy
