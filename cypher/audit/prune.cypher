// Delete pruned events ($events: {id, chains, seq} of a chain's prefix, or {id, node} of an event
// out of every chain's order) and move each chain's checkpoint forward (never back), in one
// transaction: a pruned chain still verifies from its checkpoint (signed under the key version it
// names). Prunes take one lock first, so a prune's events are looked up only after any other
// prune committed: an event another prune deleted is not found (and not counted) here.
MERGE (lock:AuditPruneLock {id: "prune"})
SET lock._lock = true
REMOVE lock._lock
WITH lock
CALL () {
  UNWIND $checkpoints AS cp
  MERGE (k:AuditCheckpoint {chain: cp.chain})
  WITH k, cp WHERE k.seq IS NULL OR k.seq < cp.seq
  SET k.seq = cp.seq, k.mac = cp.mac, k.sig = cp.sig, k.key_version = cp.key_version
}
UNWIND $events AS ev
CALL (ev) {
  // An event of a chain's prefix, by its place (a seek on (chain, seq), for each form of the
  // chain's id it may hold: audit/ids.py chain_forms).
  MATCH (e:AuditEvent)
  WHERE ev.node IS NULL AND e.chain IN ev.chains AND e.seq = ev.seq AND e.id = ev.id
  RETURN e
  UNION
  // An event out of every chain's order, by the node prune_leftovers read.
  MATCH (e:AuditEvent)
  WHERE elementId(e) = ev.node AND e.id = ev.id
  RETURN e
}
DETACH DELETE e
RETURN count(*) AS pruned
