// Claim (application, key) for one request, or report what holds it.
// The MERGE is serialised by the idempotency_key uniqueness constraint: of concurrent claims
// exactly one creates the entry. An entry past its expiry (not swept yet) or a pending one
// whose lease ran out (its request's process died) is taken over as if new.
// The response ciphertext is returned only to a request with the same hash (a replay).
MERGE (k:IdempotencyKey {application_id: $application_id, key: $key})
  ON CREATE SET k.new = true
WITH k, k.new IS NOT NULL AS created
WITH k, created OR k.expires_at <= datetime()
     OR (k.state = 'pending' AND k.lease_until <= datetime()) AS claimed
FOREACH (_ IN CASE WHEN claimed THEN [1] ELSE [] END |
  SET k.tenant_id = $tenant_id, k.state = 'pending', k.request_hash = $request_hash,
      k.claim = $claim, k.created_at = datetime(),
      k.expires_at = datetime() + duration({seconds: $ttl}),
      k.lease_until = datetime() + duration({seconds: $lease}),
      k.status = null, k.content_type = null, k.response_ct = null, k.token_ids = null,
      k.transforms = null)
REMOVE k.new
RETURN claimed, k.state AS state, k.request_hash = $request_hash AS same_request,
       k.status AS status, k.content_type AS content_type,
       CASE WHEN k.request_hash = $request_hash THEN k.response_ct END AS response_ct,
       k.token_ids AS token_ids, k.transforms AS transforms
