// One tenant with the number of its live applications; no row: no such tenant.
MATCH (t:Tenant {id: $id})
OPTIONAL MATCH (t)-[:HAS_APPLICATION]->(a:Application)
WHERE a.deleted_at IS NULL
RETURN t {.id, .name, .created_at, .dek_version, .wrapped_deks, .wrapped_hmac_key} AS tenant,
       count(a) AS applications
