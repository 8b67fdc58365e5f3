// A tenant with its wrapped keys, its first (management) application and that application's key.
CREATE (t:Tenant {id: $tenant_id, name: $name, created_at: datetime()})
SET t += $key_material
CREATE (a:Application {
  tenant_id: $tenant_id, id: $application_id, name: $application_name,
  permissions: $permissions, rules: $rules, created_at: datetime(), created_by: null})
CREATE (k:ApiKey {
  id: $key_id, hash: $hash, tenant_id: $tenant_id, application_id: $application_id,
  created_at: datetime()})
CREATE (t)-[:HAS_APPLICATION]->(a)-[:HAS_KEY]->(k)
RETURN t.id AS tenant_id
