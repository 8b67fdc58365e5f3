// One index seek on the key digest; returns the application and its tenant's wrapped keys.
MATCH (k:ApiKey {hash: $hash})
WHERE k.revoked_at IS NULL
MATCH (a:Application {tenant_id: k.tenant_id, id: k.application_id})
WHERE a.deleted_at IS NULL
MATCH (t:Tenant {id: k.tenant_id})
RETURN k.id AS key_id, k.hash AS hash,
       a {.id, .tenant_id, .permissions, .rules} AS application,
       properties(t) AS tenant
