// Events of every tenant in a time range, oldest first, a page at a time from the cursor on (a
// range seek on the (at) index, once per form of the time: $times, as integers, as events hold
// it since docs/adr/0028, then as DateTimes, as events stored before do; the page sorted by the
// instant whichever the form). Each with what its `prev` is taken from when it does not hold
// one (repository/audit.py): the event before it in its chain (a seek on (chain, seq)) and the
// chain's checkpoint. The event before may hold the chain's id in the other form (an integer,
// or the text of events stored before docs/adr/0028): the seek takes both; the checkpoint is
// named by the text. An event of a placed chain (audit/chain.py) is signed without `prev`: the
// export gives it none (`placed`), and nothing is looked up for it.
UNWIND $times AS t
CALL (t) {
  MATCH (e:AuditEvent)
  WHERE e.at >= t.since AND e.at < t.until AND e.at >= t.after
    AND (e.at > t.after OR e.id > $after_id)
  WITH e ORDER BY e.at, e.id
  LIMIT $limit
  RETURN e
}
WITH e, CASE WHEN e.at IS :: INTEGER THEN e.at ELSE e.at.epochSeconds * 1000000 + e.at.microsecond END AS instant
ORDER BY instant, e.id
LIMIT $limit
WITH e, instant,
     EXISTS { MATCH (c:AuditChain {id: toString(e.chain)}) WHERE c.placed = true } AS placed
ORDER BY instant, e.id
RETURN properties(e) AS event, placed,
       CASE WHEN e.prev IS NULL AND e.seq > 1 AND NOT placed THEN
         COLLECT { MATCH (p:AuditEvent)
                   WHERE p.chain IN [toString(e.chain), toIntegerOrNull(e.chain)]
                     AND p.seq = e.seq - 1
                   RETURN p {.mac, .mac_end} }[0] END AS before,
       CASE WHEN e.prev IS NULL AND e.seq > 1 AND NOT placed THEN
         COLLECT { MATCH (k:AuditCheckpoint {chain: toString(e.chain)}) WHERE k.seq = e.seq - 1
                   RETURN k.mac }[0] END AS checkpoint_mac
