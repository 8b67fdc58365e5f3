// The outcomes of attempts, in one statement: $outcomes in the order the attempts ended (`n`
// numbers them), each {webhook_id, event_id, claim, success, outcome, status, error,
// duration_ms, response, retry_ms}. Each is recorded by the worker that holds its claim (a
// worker whose lease lapsed and was taken over records nothing). Success: the delivery is done
// (its attempts stay listed, the delivery is pruned later). Failure: tried again in
// `retry_ms`, or failed for good when it is null; a delivery paused meanwhile (its webhook
// disabled) stays paused unless the attempt succeeded.
// Then, per webhook, its run of failures: one whose last recorded outcome here is a success
// ends its run (the webhook is written only if a run was under way); one whose last is a
// failure starts a run unless one is under way (a run restarts if it also succeeded here), and
// a webhook that has failed every delivery for $disable_after_ms is disabled (its pending
// deliveries paused). One row per webhook: whether this statement disabled it.
UNWIND $outcomes AS o
CALL (o) {
  MATCH (d:WebhookDelivery {webhook_id: o.webhook_id, event_id: o.event_id})
  WHERE d.claim = o.claim
  // The write lock first: `state` is then read as committed (a disable may have paused it).
  SET d.claim = null
  WITH d, d.attempts + 1 AS attempt,
       CASE WHEN o.success OR o.retry_ms IS NULL THEN null
            ELSE datetime() + duration({milliseconds: o.retry_ms}) END AS next_at
  CREATE (a:WebhookAttempt {id: randomUUID(), tenant_id: d.tenant_id, webhook_id: d.webhook_id,
                            event_id: d.event_id, type: d.type, attempt: attempt,
                            outcome: o.outcome, status: o.status, error: o.error,
                            duration_ms: o.duration_ms, response: o.response, at: datetime(),
                            next_at: next_at})
  SET d.state = CASE WHEN o.success THEN "delivered" WHEN d.state = "paused" THEN "paused"
                     WHEN next_at IS NULL THEN "failed" ELSE "pending" END,
      d.attempts = attempt, d.next_at = coalesce(next_at, d.next_at),
      d.not_before = coalesce(next_at, d.next_at)
  RETURN d.tenant_id AS tenant_id
}
WITH o.webhook_id AS hook, tenant_id,
     max(CASE WHEN o.success THEN o.n END) AS last_success,
     max(CASE WHEN o.success THEN null ELSE o.n END) AS last_failure
WITH hook, tenant_id, last_success,
     last_failure IS NOT NULL AND (last_success IS NULL OR last_failure > last_success)
       AS failing
MATCH (w:Webhook {tenant_id: tenant_id, id: hook})
CALL (w, failing) {
  WITH w WHERE NOT failing AND w.failing_since IS NOT NULL
  SET w.failing_since = null
}
CALL (w, failing, last_success) {
  WITH w WHERE failing
  SET w.failing_since = CASE WHEN last_success IS NULL THEN coalesce(w.failing_since, datetime())
                             ELSE datetime() END
}
WITH w, failing AND w.status = "enabled"
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
RETURN w.id AS webhook_id, disable AS disabled
