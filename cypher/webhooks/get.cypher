// One webhook of the caller's tenant within the caller's readable containers ($prefixes):
// another tenant's, or one outside them, reads as absent.
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
WHERE @all_in_prefixes(w)
RETURN @webhook(w) AS webhook
