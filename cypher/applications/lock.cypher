// Write-lock the application until commit, so the grant check made on it still holds when we write.
// It is checked again under the lock (reads there see the committed state): an application whose
// delete committed while this statement waited is gone, no row (404), not a deleted application
// for the update or the key issue that follows to refuse.
// The first statement of its transaction: inside a request it is sent with the audit prefix in
// front (repository/audit_prefix.py; docs/architecture.md, "The audit prefix").
MATCH (a:Application {tenant_id: $tenant_id, id: $id})
WHERE a.deleted_at IS NULL
SET a._lock = true
REMOVE a._lock
WITH a WHERE a.deleted_at IS NULL
RETURN a {.id, .tenant_id, .name, .permissions, .rules, .created_at, .created_by, .modified_at}
       AS application
