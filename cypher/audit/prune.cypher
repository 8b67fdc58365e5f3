// Delete pruned events and move each chain's checkpoint forward (never back), in one
// transaction: a pruned chain still verifies from its checkpoint. Prunes take one lock first,
// so a prune's events are looked up only after any other prune committed: an event another
// prune deleted is not found (and not counted) here.
MERGE (lock:AuditPruneLock {id: "prune"})
SET lock._lock = true
REMOVE lock._lock
WITH lock
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
