// Whether every token a kept answer named is as the answer showed it: none deleted (or swept)
// since the request began, none expired or changed since the answer was kept. A replay must not
// show the data of a token deleted or changed since (a deleted token's data is gone for good).
// An id no token ever held (a create answered by a dedup match never made its new id) is no
// change. Seeks on the token key and the deleted-token index; no row for an empty list,
// so the count is 0.
// @live: cypher/fragments/ (expanded when the catalog loads).
MATCH (k:IdempotencyKey {application_id: $application_id, key: $key})
WHERE k.state = 'done'
UNWIND coalesce(k.token_ids, []) AS id
OPTIONAL MATCH (t:Token {tenant_id: $tenant_id, id: id})
WITH k, id, t IS NOT NULL
            AND NOT (@live(t) AND coalesce(t.modified_at, t.created_at) <= k.done_at) AS changed
OPTIONAL MATCH (d:DeletedToken {tenant_id: $tenant_id, id: id})
  WHERE d.deleted_at >= k.created_at
WITH changed OR d IS NOT NULL AS stale
RETURN count(CASE WHEN stale THEN 1 END) = 0 AS unchanged
