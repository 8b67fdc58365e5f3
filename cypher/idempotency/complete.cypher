// Keep the first response of a claimed key (encrypted under the tenant's key) for replays.
// Only the claim that holds the entry may complete it.
MATCH (k:IdempotencyKey {application_id: $application_id, key: $key})
WHERE k.claim = $claim AND k.state = 'pending'
SET k.state = 'done', k.status = $status, k.content_type = $content_type,
    k.response_ct = $response_ct, k.lease_until = null,
    k.token_ids = $token_ids, k.transforms = $transforms
RETURN k.key AS key
