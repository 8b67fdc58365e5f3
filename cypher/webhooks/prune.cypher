// Attempts older than the retention, and deliveries failed for good as long ago, deleted in
// bounded inner transactions (an auto-commit statement).
CALL () {
  MATCH (a:WebhookAttempt) WHERE a.at < datetime() - duration({milliseconds: $retention_ms})
  RETURN a AS old
  UNION
  MATCH (d:WebhookDelivery) WHERE d.state = "failed"
    AND d.next_at < datetime() - duration({milliseconds: $retention_ms})
  RETURN d AS old
}
CALL (old) {
  DELETE old
} IN TRANSACTIONS OF $batch ROWS ON ERROR CONTINUE
RETURN count(*) AS pruned
