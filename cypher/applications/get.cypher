// One live application of the caller's tenant: a deleted or foreign one reads as absent.
MATCH (a:Application {tenant_id: $tenant_id, id: $id})
WHERE a.deleted_at IS NULL
RETURN a {.id, .tenant_id, .name, .permissions, .rules, .created_at, .created_by, .modified_at}
       AS application
