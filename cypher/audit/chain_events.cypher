// One chain's events in sequence order, a page at a time (a seek on (chain, seq)). Events hold
// the chain's id as an integer, those stored before docs/adr/0028 as its text: $chains holds
// both forms (audit/ids.py chain_forms), one seek each, read in index order and stopping at a
// page; the lowest of the two pages are the page.
UNWIND $chains AS chain
CALL (chain) {
  MATCH (e:AuditEvent)
  WHERE e.chain = chain AND e.seq > $after
  WITH e ORDER BY e.chain, e.seq
  LIMIT $limit
  RETURN e
}
WITH e ORDER BY e.seq
LIMIT $limit
RETURN properties(e) AS event
