// A new application with its first key, in one commit; MERGE on the unique ids makes a driver retry harmless.
// Inside a request it is sent with the audit prefix in front (repository/audit_prefix.py;
// docs/architecture.md, "The audit prefix").
MATCH (t:Tenant {id: $tenant_id})
MERGE (a:Application {tenant_id: $tenant_id, id: $application_id})
  ON CREATE SET a.name = $name, a.permissions = $permissions, a.rules = $rules,
                a.created_at = datetime(), a.created_by = $created_by
MERGE (t)-[:HAS_APPLICATION]->(a)
MERGE (k:ApiKey {id: $key_id})
  ON CREATE SET k.hash = $hash, k.tenant_id = $tenant_id, k.application_id = $application_id,
                k.created_at = datetime()
MERGE (a)-[:HAS_KEY]->(k)
RETURN a {.id, .tenant_id, .name, .permissions, .rules, .created_at, .created_by, .modified_at}
       AS application
