// The outcome of one attempt, by the worker that holds the claim (a worker whose lease lapsed
// and was taken over records nothing). Success: the delivery is done (its attempts stay
// listed, the delivery is pruned later). Failure: tried again in $retry_ms, or failed for good when $retry_ms is null; the
// webhook's run of failures starts (failing_since) unless one is under way, and a webhook that
// has failed every delivery for $disable_after_ms is disabled (its pending deliveries paused).
// A success ends the run.
MATCH (d:WebhookDelivery {webhook_id: $webhook_id, event_id: $event_id})
WHERE d.claim = $claim
MATCH (w:Webhook {tenant_id: d.tenant_id, id: d.webhook_id})
WITH d, w, d.attempts + 1 AS attempt,
     CASE WHEN $success OR $retry_ms IS NULL THEN null
          ELSE datetime() + duration({milliseconds: $retry_ms}) END AS next_at
CREATE (a:WebhookAttempt {id: randomUUID(), tenant_id: d.tenant_id, webhook_id: d.webhook_id,
                          event_id: d.event_id, type: d.type, attempt: attempt,
                          outcome: $outcome, status: $status, error: $error,
                          duration_ms: $duration_ms, response: $response, at: datetime(),
                          next_at: next_at})
SET d.attempts = attempt, d.claim = null, d.next_at = coalesce(next_at, d.next_at),
    d.not_before = coalesce(next_at, d.next_at),
    d.state = CASE WHEN $success THEN "delivered" WHEN next_at IS NULL THEN "failed"
                   ELSE "pending" END
WITH d, w
SET w.failing_since = CASE WHEN $success THEN null ELSE coalesce(w.failing_since, datetime()) END
WITH d, w, NOT $success AND w.status = "enabled"
           AND w.failing_since <= datetime() - duration({milliseconds: $disable_after_ms})
           AS disable
CALL (w, disable) {
  WITH w WHERE disable
  SET w.status = "disabled", w.disabled_reason = "failing",
      w.disabled_at = datetime()
  WITH w
  // `event_id IS NOT NULL` (always true): the webhook_delivery_key index seeks on its prefix.
  MATCH (p:WebhookDelivery {webhook_id: w.id})
  WHERE p.event_id IS NOT NULL AND p.state = "pending"
  SET p.state = "paused"
}
RETURN disable AS disabled
