// A new secret; the one it replaces keeps signing (a second signature) until $overlap_ms
// from now, so receivers can switch without losing a delivery.
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
SET w.previous_secret_ct = w.secret_ct,
    w.previous_secret_until = datetime() + duration({milliseconds: $overlap_ms}),
    w.secret_ct = $secret_ct, w.modified_at = datetime(), w.modified_by = $actor
RETURN @webhook(w) AS webhook
