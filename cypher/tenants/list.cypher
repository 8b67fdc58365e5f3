// One page of tenants in id order after the cursor (the tenant_id uniqueness index seeks it), with
// the number of live applications and the key-encryption key versions that wrap its keys.
MATCH (t:Tenant)
WHERE t.id > $after
WITH t ORDER BY t.id LIMIT $limit
OPTIONAL MATCH (t)-[:HAS_APPLICATION]->(a:Application)
WHERE a.deleted_at IS NULL
RETURN t {.id, .name, .created_at, .dek_version, .wrapped_deks, .wrapped_hmac_key} AS tenant,
       count(a) AS applications
ORDER BY tenant.id
