// Working keys as ids and dates only (the hash never leaves Neo4j); no row means no such application.
MATCH (a:Application {tenant_id: $tenant_id, id: $application_id})
WHERE a.deleted_at IS NULL
OPTIONAL MATCH (a)-[:HAS_KEY]->(k:ApiKey)
WHERE k.revoked_at IS NULL
WITH a, k
ORDER BY k.created_at, k.id
RETURN a.id AS application_id, collect(k {.id, .application_id, .created_at}) AS keys
