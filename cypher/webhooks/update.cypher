// Merge-patch a webhook: $changes holds the fields given (url, events, containers,
// description, status). Disabling pauses its pending deliveries; enabling resumes them at once
// and forgets a past run of failures.
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
WITH w, w.status AS was
SET w += $changes, w.modified_at = datetime(), w.modified_by = $actor
WITH w, was
CALL (w, was) {
  WITH w, was WHERE was <> w.status
  SET w.failing_since = null, w.disabled_reason = null
  WITH w
  // `event_id IS NOT NULL` (always true): the webhook_delivery_key index seeks on its prefix.
  MATCH (d:WebhookDelivery {webhook_id: w.id})
  WHERE d.event_id IS NOT NULL AND d.state = CASE w.status WHEN "enabled" THEN "paused" ELSE "pending" END
  SET d.state = CASE w.status WHEN "enabled" THEN "pending" ELSE "paused" END,
      d.next_at = datetime(), d.not_before = datetime()
}
RETURN @webhook(w) AS webhook
