// One webhook of the caller's tenant (another tenant's reads as absent).
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
RETURN @webhook(w) AS webhook
