// Lock a live token the caller may update (its containers under $prefixes) and return it:
// the write lock is taken before any property is read and held until the update transaction
// commits, so concurrent updates of one token run one after another and none is lost.
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE @visible(t)
SET t._lock = true
REMOVE t._lock
WITH t
RETURN @token(t) AS token
