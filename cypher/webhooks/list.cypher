// A page of the tenant's webhooks in id order after $after (a seek on webhook_tenant_id).
MATCH (w:Webhook {tenant_id: $tenant_id})
WHERE w.id > $after
WITH w ORDER BY w.id LIMIT $limit
RETURN collect(@webhook(w)) AS webhooks
