// Events past the retention cutoff, oldest first, a page at a time (the (at) index), each with
// whether it is out of every chain's order: at or below its chain's checkpoint (left by a prune
// that went by time alone), or in no chain (a write whose request never linked its event).
MATCH (e:AuditEvent)
WHERE e.at < $cutoff AND (e.at > $after_at OR (e.at = $after_at AND e.id > $after_id))
WITH e ORDER BY e.at, e.id
LIMIT $batch
OPTIONAL MATCH (k:AuditCheckpoint {chain: e.chain})
RETURN e.id AS id, e.at AS at, coalesce(e.chain IS NULL OR e.seq <= k.seq, false) AS out_of_order
