// Events past the retention cutoff, oldest first, a page at a time from the cursor on (a range
// seek on the (at) index, once per form of the time: $times, as in export.cypher), each with
// whether it is out of every chain's order: in no chain (a write whose request never linked
// its event), in a chain nobody started, without a sequence number, or at or below its chain's checkpoint (left by a prune that went by time alone). A
// chain and its checkpoint are named by its id's text; events hold it as an integer
// (docs/adr/0028), or as that text.
UNWIND $times AS t
CALL (t) {
  MATCH (e:AuditEvent)
  WHERE e.at < t.cutoff AND e.at >= t.after
    AND (e.at > t.after OR e.id > $after_id)
  WITH e ORDER BY e.at, e.id
  LIMIT $batch
  RETURN e
}
WITH e, CASE WHEN e.at IS :: INTEGER THEN e.at ELSE e.at.epochSeconds * 1000000 + e.at.microsecond END AS instant
ORDER BY instant, e.id
LIMIT $batch
OPTIONAL MATCH (c:AuditChain {id: toString(e.chain)})
OPTIONAL MATCH (k:AuditCheckpoint {chain: toString(e.chain)})
RETURN e.id AS id, e.at AS at, elementId(e) AS node,
       e.chain IS NULL OR c IS NULL OR e.seq IS NULL OR coalesce(e.seq <= k.seq, false)
         AS out_of_order
