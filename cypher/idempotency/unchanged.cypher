// Whether every token a kept answer named is still live and unchanged since it was kept: a
// replay must not show the data of a token deleted, expired or changed since (its data is
// removed permanently, spec §4.5). One seek per token on the token key; no row for an empty
// list, so count(id) = count(t) = 0.
// @live: cypher/fragments/ (expanded when the catalog loads).
MATCH (k:IdempotencyKey {application_id: $application_id, key: $key})
WHERE k.state = 'done'
UNWIND coalesce(k.token_ids, []) AS id
OPTIONAL MATCH (t:Token {tenant_id: $tenant_id, id: id})
WHERE @live(t) AND coalesce(t.modified_at, t.created_at) <= k.done_at
RETURN count(id) = count(t) AS unchanged
