// One chain's checkpoint and its next events past it, lowest sequence number first, a batch at a
// time (a seek on (chain, seq)). A prune deletes only what continues a chain from its
// checkpoint, each event linking to the one before, so nothing of the chain stays below the
// checkpoint it leaves (docs/audit.md, "Retention").
OPTIONAL MATCH (k:AuditCheckpoint {chain: $chain})
WITH coalesce(k.seq, 0) AS done, coalesce(k.mac, "") AS done_mac
CALL (done) {
  MATCH (e:AuditEvent)
  WHERE e.chain = $chain AND e.seq > done
  WITH e ORDER BY e.chain, e.seq
  LIMIT $limit
  RETURN collect(properties(e)) AS events
}
RETURN done, done_mac, events
