// A new secret; the one it replaces keeps signing (a second signature) until $overlap_ms
// from now, so receivers can switch without losing a delivery. Only a webhook within the
// caller's readable containers ($prefixes), checked under the write lock (update.cypher); no
// row otherwise.
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
SET w._lock = true
REMOVE w._lock
WITH w WHERE @all_in_prefixes(w)
SET w.previous_secret_ct = w.secret_ct,
    w.previous_secret_until = datetime() + duration({milliseconds: $overlap_ms}),
    w.secret_ct = $secret_ct, w.modified_at = datetime(), w.modified_by = $actor
RETURN @webhook(w) AS webhook
