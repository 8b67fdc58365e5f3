// A new webhook of the caller's tenant, enabled; its secret arrives encrypted under the
// tenant's key and never leaves the database in an answer.
MATCH (tenant:Tenant {id: $tenant_id})
CREATE (w:Webhook {tenant_id: $tenant_id, id: $id})
SET w.url = $url, w.events = $events, w.containers = $containers,
    w.description = $description, w.status = "enabled", w.secret_ct = $secret_ct,
    w.created_at = datetime(), w.created_by = $actor
RETURN @webhook(w) AS webhook
