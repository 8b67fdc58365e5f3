// Chains of write events that hold nothing and never will again, deleted (with a checkpoint,
// should one name them): each of $chains whose writer stopped giving its numbers before
// $before (microseconds since 1970), holding no event of any kind (@chain_holds: all that
// verification reads of a chain) and settled by no stored block (a seek on the index of what
// blocks settle). A chain with neither has nothing left to check, and the chains every prune
// pass lists stay those within the retention. Taken under the prune lock, as prune.cypher.
MERGE (lock:AuditPruneLock {id: "prune"})
SET lock._lock = true
REMOVE lock._lock
WITH lock
UNWIND $chains AS id
MATCH (c:AuditChain {id: id})
WHERE c.writes = true AND c.until <= $before
  AND NOT @chain_holds(c)
  AND NOT EXISTS {
    MATCH (b:AuditBlock) USING INDEX b:AuditBlock(settles)
    WHERE b.settles = c.id
  }
OPTIONAL MATCH (k:AuditCheckpoint {chain: c.id})
DETACH DELETE c, k
RETURN count(DISTINCT id) AS retired
