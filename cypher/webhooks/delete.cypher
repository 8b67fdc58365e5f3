// Delete a webhook with its deliveries and their attempts (each found by a seek on its
// index's first property; the IS NOT NULL, always true, lets the composite index serve it).
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
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
