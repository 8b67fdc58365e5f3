// Events that belong to no chain's order: written by a write's transaction whose request never
// got to link them (a crash in between), or made by hand (in no chain, in a chain no writer
// started, or without a sequence number). A chain is named by its id's text; events hold it as
// an integer (docs/adr/0028), or as that text.
MATCH (e:AuditEvent)
WHERE e.chain IS NULL OR e.seq IS NULL
   OR NOT EXISTS { MATCH (:AuditChain {id: toString(e.chain)}) }
RETURN e.id AS id
LIMIT $limit
