// Merge-patch a webhook: $changes holds the fields given (url, events, containers,
// description, status). Disabling pauses its pending deliveries; enabling resumes them at once
// and forgets a past run of failures.
// Only a webhook within the caller's readable containers ($prefixes), as they stand before
// the patch (its new ones are checked before it is sent): the check is made under the write
// lock, on containers no earlier part of the statement read, so a concurrent change of them
// is seen committed. No row otherwise.
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
SET w._lock = true
REMOVE w._lock
WITH w WHERE @all_in_prefixes(w)
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
