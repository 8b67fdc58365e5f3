// One event sent again to one webhook, on the caller's request: its delivery, failed for good,
// delivered (kept an hour) or waiting for its next attempt, is due now (paused while the
// webhook is disabled). Its attempts are not reset: a failure of this attempt follows the
// retry schedule from the attempts made, so a delivery failed for good is tried once more.
// A delivery a sender holds a live claim on (`in_flight`) is left as it is.
// Only a webhook within the caller's readable containers ($prefixes), checked under the write
// lock (update.cypher); no row otherwise. `found`: whether the webhook has this delivery.
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
SET w._lock = true
REMOVE w._lock
WITH w WHERE @all_in_prefixes(w)
OPTIONAL MATCH (d:WebhookDelivery {webhook_id: w.id, event_id: $event_id})
CALL (d) {
  WITH d WHERE d IS NOT NULL
  // The delivery's write lock: its state and claim are then read as committed.
  SET d._lock = true
  REMOVE d._lock
}
WITH w, d, d.claim IS NOT NULL AND d.next_at > datetime() AS in_flight
CALL (w, d, in_flight) {
  WITH w, d WHERE d IS NOT NULL AND NOT in_flight
  // A claim whose lease lapsed is dropped (as release.cypher does): its sender, if it still
  // ends its attempt, records nothing over this.
  SET d.state = CASE w.status WHEN "enabled" THEN "pending" ELSE "paused" END,
      d.next_at = datetime(), d.not_before = datetime(), d.claim = null
}
RETURN d IS NOT NULL AS found, coalesce(in_flight, false) AS in_flight, d.state AS state
