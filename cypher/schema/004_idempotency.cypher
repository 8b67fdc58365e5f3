// Idempotency keys: one entry per (application, key), held across replicas by this constraint
// (a concurrent retry's MERGE waits on its index entry instead of creating a second one).
CREATE CONSTRAINT idempotency_key IF NOT EXISTS
  FOR (k:IdempotencyKey) REQUIRE (k.application_id, k.key) IS UNIQUE;
// The sweeper seeks expired entries by time.
CREATE INDEX idempotency_expires_at IF NOT EXISTS FOR (k:IdempotencyKey) ON (k.expires_at);
