// Events of every tenant in a time range, oldest first, a page at a time from the cursor on (a
// range seek on the (at) index). Each with what its `prev` is taken from when it does not hold
// one (repository/audit.py): the event before it in its chain (a seek on (chain, seq)) and the
// chain's checkpoint. The event before may hold the chain's id in the other form (an integer,
// or the text of events stored before docs/adr/0028): the seek takes both; the checkpoint is
// named by the text.
MATCH (e:AuditEvent)
WHERE e.at >= $since AND e.at < $until AND e.at >= $after_at
  AND (e.at > $after_at OR e.id > $after_id)
WITH e ORDER BY e.at, e.id
LIMIT $limit
RETURN properties(e) AS event,
       CASE WHEN e.prev IS NULL AND e.seq > 1 THEN
         COLLECT { MATCH (p:AuditEvent)
                   WHERE p.chain IN [toString(e.chain), toIntegerOrNull(e.chain)]
                     AND p.seq = e.seq - 1
                   RETURN p {.mac, .mac_end} }[0] END AS before,
       CASE WHEN e.prev IS NULL AND e.seq > 1 THEN
         COLLECT { MATCH (k:AuditCheckpoint {chain: toString(e.chain)}) WHERE k.seq = e.seq - 1
                   RETURN k.mac }[0] END AS checkpoint_mac
