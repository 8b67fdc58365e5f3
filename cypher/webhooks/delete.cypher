// Delete a webhook with its deliveries and their attempts.
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
CALL (w) {
  MATCH (d:WebhookDelivery {webhook_id: w.id})
  DELETE d
}
CALL (w) {
  MATCH (a:WebhookAttempt {webhook_id: w.id})
  DELETE a
}
DELETE w
RETURN $id AS id
