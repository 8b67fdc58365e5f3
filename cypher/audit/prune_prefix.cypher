// One chain's next events past its pruning checkpoint, lowest sequence number first, a batch at
// a time (a seek on (chain, seq)). A prune deletes only what continues a chain from its
// checkpoint, so nothing of the chain stays below the checkpoint it leaves (README "Retention").
OPTIONAL MATCH (k:AuditCheckpoint {chain: $chain})
WITH coalesce(k.seq, 0) AS done
CALL (done) {
  MATCH (e:AuditEvent)
  WHERE e.chain = $chain AND e.seq > done
  WITH e ORDER BY e.chain, e.seq
  LIMIT $batch
  RETURN collect({id: e.id, seq: e.seq, mac: e.mac, at: e.at}) AS events
}
RETURN done, events
