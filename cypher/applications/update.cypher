// PUT replaces what an application may do; the caller has checked the new grants against its own.
MATCH (a:Application {tenant_id: $tenant_id, id: $id})
WHERE a.deleted_at IS NULL
SET a.name = $name, a.permissions = $permissions, a.rules = $rules,
    a.modified_at = datetime(), a.modified_by = $modified_by
RETURN a {.id, .tenant_id, .name, .permissions, .rules, .created_at, .created_by, .modified_at}
       AS application
