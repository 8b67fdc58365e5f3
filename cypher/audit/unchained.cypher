// Events that belong to no chain's order: written by a write's transaction whose request never
// got to link them (a crash in between), or made by hand (in no chain, in a chain no writer
// started, or without a sequence number).
MATCH (e:AuditEvent)
WHERE e.chain IS NULL OR e.seq IS NULL OR NOT EXISTS { MATCH (:AuditChain {id: e.chain}) }
RETURN e.id AS id
LIMIT $limit
