// A new proxy of the caller's tenant; MERGE on the unique (tenant_id, id) makes a driver retry harmless.
MERGE (p:Proxy {tenant_id: $tenant_id, id: $id})
  ON CREATE SET p.name = $name, p.destination_url = $destination_url,
                p.description = $description, p.header_allowlist = $header_allowlist,
                p.created_at = datetime(), p.created_by = $created_by
RETURN p {.id, .name, .destination_url, .description, .header_allowlist, .created_at,
          .created_by, .modified_at} AS proxy
