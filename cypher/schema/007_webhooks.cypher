// Webhooks: one per (tenant, id); the outbox (cypher/fragments/outbox.cypher) seeks a tenant's
// enabled webhooks on every change, so a tenant without any pays one empty seek.
CREATE CONSTRAINT webhook_tenant_id IF NOT EXISTS
  FOR (w:Webhook) REQUIRE (w.tenant_id, w.id) IS UNIQUE;
CREATE INDEX webhook_tenant_status IF NOT EXISTS FOR (w:Webhook) ON (w.tenant_id, w.status);
// Deliveries waiting to be sent: the sender seeks pending ones by due time; a claim moves the
// due time past its lease. One delivery per (webhook, event).
CREATE INDEX webhook_delivery_due IF NOT EXISTS
  FOR (d:WebhookDelivery) ON (d.state, d.next_at);
CREATE INDEX webhook_delivery_key IF NOT EXISTS
  FOR (d:WebhookDelivery) ON (d.webhook_id, d.event_id);
// Attempts, listed newest first per webhook; kept for VAULTGRAPH_WEBHOOK_RETENTION_DAYS.
CREATE INDEX webhook_attempt_at IF NOT EXISTS
  FOR (a:WebhookAttempt) ON (a.webhook_id, a.at);
CREATE INDEX webhook_attempt_time IF NOT EXISTS FOR (a:WebhookAttempt) ON (a.at);
