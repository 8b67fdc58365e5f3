// Delete idempotency entries past their expiry (found through the idempotency_expires_at range
// index), $batch per inner transaction. Each entry's expiry is re-read under its write lock: one
// a concurrent request has just claimed again (a new expiry) is kept. A batch that fails is
// left for the next pass.
MATCH (k:IdempotencyKey)
WHERE k.expires_at < datetime()
CALL (k) {
  SET k._lock = true
  REMOVE k._lock
  WITH k WHERE k.expires_at < datetime()
  DELETE k
  RETURN 1 AS deleted
} IN TRANSACTIONS OF $batch ROWS ON ERROR CONTINUE REPORT STATUS AS status
RETURN count(deleted) AS swept, count(CASE WHEN NOT status.committed THEN 1 END) AS failed
