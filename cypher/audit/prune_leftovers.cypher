// Events past the retention cutoff, oldest first, a page at a time from the cursor on (a range
// seek on the (at) index), each with whether it is out of every chain's order: in no chain (a
// write whose request never linked its event), in a chain nobody started, without a sequence
// number, or at or below its chain's checkpoint (left by a prune that went by time alone).
MATCH (e:AuditEvent)
WHERE e.at < $cutoff AND e.at >= $after_at
  AND (e.at > $after_at OR e.id > $after_id)
WITH e ORDER BY e.at, e.id
LIMIT $batch
OPTIONAL MATCH (c:AuditChain {id: e.chain})
OPTIONAL MATCH (k:AuditCheckpoint {chain: e.chain})
RETURN e.id AS id, e.at AS at, elementId(e) AS node,
       e.chain IS NULL OR c IS NULL OR e.seq IS NULL OR coalesce(e.seq <= k.seq, false)
         AS out_of_order
