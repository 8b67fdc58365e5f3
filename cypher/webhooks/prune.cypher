// Attempts older than the retention, deliveries failed for good as long ago, and deliveries
// done more than $delivered_ms ago, deleted in bounded inner transactions (an auto-commit
// statement).
CALL () {
  MATCH (a:WebhookAttempt) WHERE a.at < datetime() - duration({milliseconds: $retention_ms})
  RETURN a AS old
  UNION
  MATCH (d:WebhookDelivery) WHERE d.state = "failed"
    AND d.next_at < datetime() - duration({milliseconds: $retention_ms})
  RETURN d AS old
  UNION
  MATCH (d:WebhookDelivery) WHERE d.state = "delivered"
    AND d.next_at < datetime() - duration({milliseconds: $delivered_ms})
  RETURN d AS old
}
CALL (old) {
  DELETE old
} IN TRANSACTIONS OF $batch ROWS ON ERROR CONTINUE
RETURN count(*) AS pruned
