// Start-up's rehearsal of the write path (repository/warmup.py, `rehearse`) commits, so that a
// commit's own work (the transaction log, index and constraint updates) has run once before
// `/ready`; this removes what it wrote. Everything it writes is under a tenant id starting with
// $prefix ("warm-up:"; tenant ids are UUIDs, so no tenant's can) and, for its audit chain, a chain
// id with the same prefix: its tokens (live and deleted, their links and metadata loops), its
// audit events and chain. By prefix rather than by the rehearsal's own ids, so the leftovers of a
// start-up stopped between the commit and this statement go too. Each is a prefix seek on an
// index; its block (an audit event of no tenant) by the chain of write events it settles. Returns
// how many nodes were removed (the rehearsal's: two tokens, six events and a block, two chains).
CALL () {
  MATCH (t:Token) WHERE t.tenant_id STARTS WITH $prefix AND t.id IS NOT NULL
  DETACH DELETE t
  RETURN count(*) AS tokens
}
CALL () {
  MATCH (d:DeletedToken) WHERE d.tenant_id STARTS WITH $prefix AND d.id IS NOT NULL
  DETACH DELETE d
  RETURN count(*) AS deleted
}
CALL () {
  MATCH (e:AuditEvent) WHERE e.tenant_id STARTS WITH $prefix AND e.at IS NOT NULL
  DETACH DELETE e
  RETURN count(*) AS events
}
CALL () {
  MATCH (b:AuditBlock) WHERE b.settles STARTS WITH $prefix
  DETACH DELETE b
  RETURN count(*) AS blocks
}
CALL () {
  MATCH (c:AuditChain) WHERE c.id STARTS WITH $prefix
  DELETE c
  RETURN count(*) AS chains
}
RETURN tokens + deleted + events + blocks + chains AS removed
