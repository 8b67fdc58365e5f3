// A page of the tenant's webhooks in id order after $after (a seek on webhook_tenant_id), of
// those within the caller's readable containers ($prefixes) only.
MATCH (w:Webhook {tenant_id: $tenant_id})
WHERE w.id > $after AND @all_in_prefixes(w)
WITH w ORDER BY w.id LIMIT $limit
RETURN collect(@webhook(w)) AS webhooks
