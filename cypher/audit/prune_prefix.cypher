// One chain's checkpoint and its next events past it, lowest sequence number first, a batch at a
// time (a seek on (chain, seq), once for each form of the chain's id its events may hold:
// $chains, audit/ids.py chain_forms). A prune deletes only what continues a chain from its
// checkpoint, each event continuing the one before (linked to it, or in a placed chain holding at
// the next number), so nothing of the chain stays below the checkpoint it leaves (docs/audit.md,
// "Retention"); `placed`, the chain's form (audit/chain.py).
OPTIONAL MATCH (k:AuditCheckpoint {chain: $chain})
WITH coalesce(k.seq, 0) AS done, coalesce(k.mac, "") AS done_mac,
     EXISTS { MATCH (c:AuditChain {id: $chain}) WHERE c.placed = true } AS placed
CALL (done) {
  UNWIND $chains AS chain
  CALL (chain, done) {
    MATCH (e:AuditEvent)
    WHERE e.chain = chain AND e.seq > done
    WITH e ORDER BY e.chain, e.seq
    LIMIT $limit
    RETURN e
  }
  WITH e ORDER BY e.seq
  LIMIT $limit
  RETURN collect(properties(e)) AS events
}
RETURN done, done_mac, placed, events
