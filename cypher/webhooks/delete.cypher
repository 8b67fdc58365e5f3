// Delete a webhook with its deliveries and their attempts (each found by a seek on its
// index's first property; the IS NOT NULL, always true, lets the composite index serve it).
// Only a webhook within the caller's readable containers ($prefixes), checked under the write
// lock (update.cypher); no row otherwise.
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
SET w._lock = true
REMOVE w._lock
WITH w WHERE @all_in_prefixes(w)
CALL (w) {
  MATCH (d:WebhookDelivery {webhook_id: w.id}) WHERE d.event_id IS NOT NULL
  DELETE d
}
CALL (w) {
  MATCH (a:WebhookAttempt {webhook_id: w.id}) WHERE a.at IS NOT NULL
  DELETE a
}
DELETE w
RETURN $id AS id
