// A further key for a live application; MERGE on the unique key id makes a driver retry harmless.
MATCH (a:Application {tenant_id: $tenant_id, id: $application_id})
WHERE a.deleted_at IS NULL
MERGE (k:ApiKey {id: $key_id})
  ON CREATE SET k.hash = $hash, k.tenant_id = $tenant_id, k.application_id = $application_id,
                k.created_at = datetime()
MERGE (a)-[:HAS_KEY]->(k)
RETURN k {.id, .application_id, .created_at} AS key
