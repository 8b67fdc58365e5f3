// Lock a live token the caller may update (its containers under $prefixes) and return it:
// the write lock is taken before the token is read for the update and held until the update
// transaction commits, so concurrent updates of one token run one after another and none is
// lost. The match found the token live before the lock; a delete, dedup merge or sweep (or an
// update moving it out of $prefixes) may have committed while this statement waited for the
// lock, so it is checked again under the lock, where reads see the committed state: no row
// then (404), never the retired node.
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
// The first statement of its transaction: inside a request it is sent with the audit prefix in
// front (repository/audit_prefix.py; docs/architecture.md, "The audit prefix").
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
WHERE @visible(t)
SET t._lock = true
REMOVE t._lock
WITH t WHERE t:Token AND @visible(t)
RETURN @token(t) AS token
