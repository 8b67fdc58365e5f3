// Attempts older than the retention, deliveries failed for good as long ago, and deliveries
// done more than $delivered_ms ago, deleted in bounded inner transactions (an auto-commit
// statement). Each inner transaction takes the delivery's write lock and reads it again before
// it deletes it: a delivery sent again since the outer read (a retry, retry_delivery.cypher,
// committed meanwhile) is due, not old, and stays.
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
  SET old._lock = true
  REMOVE old._lock
  WITH old
  WHERE old:WebhookAttempt
    OR (old.state = "failed"
        AND old.next_at < datetime() - duration({milliseconds: $retention_ms}))
    OR (old.state = "delivered"
        AND old.next_at < datetime() - duration({milliseconds: $delivered_ms}))
  DELETE old
  RETURN true AS deleted
} IN TRANSACTIONS OF $batch ROWS ON ERROR CONTINUE
RETURN count(deleted) AS pruned
