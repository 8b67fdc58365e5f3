// Give a claimed key back (its request failed in a way a retry may fix: 5xx, 429): the next
// request with the key runs as a first one.
MATCH (k:IdempotencyKey {application_id: $application_id, key: $key})
WHERE k.claim = $claim AND k.state = 'pending'
DELETE k
