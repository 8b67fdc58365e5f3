// Several requests' gets in one statement (repository/coalesce.py): gets sent while earlier
// ones were still being read, each a $rows entry ({index, tenant_id, id}), all of them
// readable under the same $prefixes. A row whose token is not visible to it (none, another
// tenant's, expired, outside the prefixes) returns no record, as tokens/get alone returns none.
// Each row reads only its own tenant's token (the tenant is part of the seek).
// @visible/@token: cypher/fragments/ (expanded when the catalog loads).
UNWIND $rows AS row
MATCH (t:Token {tenant_id: row.tenant_id, id: row.id})
WHERE @visible(t)
RETURN row.index AS index, @token(t) AS token
