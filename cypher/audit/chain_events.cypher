// One chain's events in sequence order, a page at a time (a seek on (chain, seq)).
MATCH (e:AuditEvent)
WHERE e.chain = $chain AND e.seq > $after
WITH e ORDER BY e.chain, e.seq
LIMIT $limit
RETURN properties(e) AS event
