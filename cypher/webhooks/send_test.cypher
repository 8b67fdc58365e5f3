// A webhook.test event for one webhook: a delivery of its own, due now (paused while the
// webhook is disabled). Only a webhook within the caller's readable containers ($prefixes),
// checked under the write lock (update.cypher); no row otherwise.
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
SET w._lock = true
REMOVE w._lock
WITH w WHERE @all_in_prefixes(w)
CREATE (d:WebhookDelivery)
SET d = {event_id: $event_id, type: "webhook.test", at: datetime(), tenant_id: w.tenant_id,
         webhook_id: w.id, application_id: $actor, attempts: 0, next_at: datetime(),
         state: CASE w.status WHEN "enabled" THEN "pending" ELSE "paused" END}
RETURN d.event_id AS event_id
