// Soft delete keeps the node for created_by audit references; its keys are revoked in the same commit.
MATCH (a:Application {tenant_id: $tenant_id, id: $id})
WHERE a.deleted_at IS NULL
SET a.deleted_at = datetime(), a.deleted_by = $deleted_by
WITH a
OPTIONAL MATCH (a)-[:HAS_KEY]->(k:ApiKey)
WHERE k.revoked_at IS NULL
SET k.revoked_at = datetime(), k.revoked_by = $deleted_by
RETURN a.id AS id, count(k) AS revoked
