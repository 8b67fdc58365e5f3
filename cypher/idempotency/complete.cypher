// Keep the first response of a claimed key (encrypted under the tenant's key) for replays,
// with when it was kept and a digest of the caller's access rules then: a replay shows it only
// while its tokens are unchanged since and the rules the same (idempotency/unchanged).
// Only the claim that holds the entry may complete it.
MATCH (k:IdempotencyKey {application_id: $application_id, key: $key})
WHERE k.claim = $claim AND k.state = 'pending'
SET k.state = 'done', k.status = $status, k.content_type = $content_type,
    k.response_ct = $response_ct, k.lease_until = null,
    k.token_ids = $token_ids, k.transforms = $transforms, k.rules = $rules,
    k.done_at = datetime()
RETURN k.key AS key
