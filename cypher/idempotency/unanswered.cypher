// The claimed request's write committed but it was answered with an error (its answer lost,
// or a failure after the commit): the entry is kept, without an answer, so a retry is told so
// rather than run again (a second token, a second key).
MATCH (k:IdempotencyKey {application_id: $application_id, key: $key})
WHERE k.claim = $claim AND k.state = 'pending'
SET k.state = 'unanswered', k.lease_until = null, k.token_ids = $token_ids
RETURN k.key AS key
