// Events that belong to no chain: written by a write's transaction whose request never got to
// link them (a crash in between), or created by hand.
MATCH (e:AuditEvent)
WHERE e.chain IS NULL
RETURN e.id AS id
LIMIT $limit
