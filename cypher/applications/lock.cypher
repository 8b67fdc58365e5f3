// Write-lock the application until commit, so the grant check made on it still holds when we write.
MATCH (a:Application {tenant_id: $tenant_id, id: $id})
WHERE a.deleted_at IS NULL
SET a._lock = true
REMOVE a._lock
RETURN a {.id, .tenant_id, .name, .permissions, .rules, .created_at, .created_by, .modified_at}
       AS application
