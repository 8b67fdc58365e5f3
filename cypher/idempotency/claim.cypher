// Claim (application, key) for one request, or report what holds it.
// The MERGE is serialised by the idempotency_key uniqueness constraint: of concurrent claims
// exactly one creates the entry. An existing entry is write-locked before anything of it is
// read (ON MATCH SET), so of concurrent claims that find one, one decides at a time, each on
// what the one before committed: an expired entry or a lapsed lease is taken over once.
// An entry past its expiry (not swept yet) is taken over as if new. A pending one whose lease
// ran out (its request's process died, or the answer of its write never came) is taken over
// only if that request changed nothing: a write marks the entry `written` in its own
// transaction (repository/audit_prefix.py AUDIT_PREFIX), so a marked entry means the first request
// was carried out and its answer lost; it becomes `unanswered` and the request is not run again.
// The response ciphertext is returned only to a request with the same hash (a replay).
// For an entry still pending: how long ago its request claimed it and how long its lease has
// left, in milliseconds by the database's clock (a retry's Retry-After).
MERGE (k:IdempotencyKey {application_id: $application_id, key: $key})
  ON CREATE SET k.new = true
  ON MATCH SET k._lock = true
REMOVE k._lock
WITH k, k.new IS NOT NULL AS created
WITH k, created, NOT created AND k.state = 'pending' AND k.lease_until <= datetime() AS lapsed
WITH k, lapsed AND k.written IS NOT NULL AS lost,
     created OR k.expires_at <= datetime() OR (lapsed AND k.written IS NULL) AS claimed
FOREACH (_ IN CASE WHEN claimed THEN [1] ELSE [] END |
  SET k.tenant_id = $tenant_id, k.state = 'pending', k.request_hash = $request_hash,
      k.claim = $claim, k.created_at = datetime(),
      k.expires_at = datetime() + duration({seconds: $ttl}),
      k.lease_until = datetime() + duration({seconds: $lease}),
      k.status = null, k.content_type = null, k.response_ct = null, k.token_ids = null,
      k.transforms = null, k.done_at = null, k.rules = null, k.written = null)
FOREACH (_ IN CASE WHEN lost AND NOT claimed THEN [1] ELSE [] END |
  SET k.state = 'unanswered', k.lease_until = null)
REMOVE k.new
RETURN claimed, k.state AS state, k.request_hash = $request_hash AS same_request,
       k.status AS status, k.content_type AS content_type,
       CASE WHEN k.request_hash = $request_hash THEN k.response_ct END AS response_ct,
       k.token_ids AS token_ids, k.transforms AS transforms, k.rules AS rules,
       CASE WHEN k.state = 'pending'
            THEN datetime().epochMillis - k.created_at.epochMillis END AS age_ms,
       CASE WHEN k.state = 'pending'
            THEN k.lease_until.epochMillis - datetime().epochMillis END AS lease_ms
