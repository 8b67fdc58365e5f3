// Revoke one key of a live application; the node stays as the audit record of the key.
MATCH (a:Application {tenant_id: $tenant_id, id: $application_id})-[:HAS_KEY]->
      (k:ApiKey {id: $key_id})
WHERE a.deleted_at IS NULL AND k.revoked_at IS NULL
SET k.revoked_at = datetime(), k.revoked_by = $revoked_by
RETURN k.id AS id
