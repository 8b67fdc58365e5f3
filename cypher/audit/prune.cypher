// Delete pruned events and move each chain's checkpoint forward (never back), in one
// transaction: a pruned chain still verifies from its checkpoint.
CALL () {
  UNWIND $checkpoints AS cp
  MERGE (k:AuditCheckpoint {chain: cp.chain})
  WITH k, cp WHERE k.seq IS NULL OR k.seq < cp.seq
  SET k.seq = cp.seq, k.mac = cp.mac, k.sig = cp.sig
}
UNWIND $ids AS id
MATCH (e:AuditEvent {id: id})
DETACH DELETE e
RETURN count(*) AS pruned
