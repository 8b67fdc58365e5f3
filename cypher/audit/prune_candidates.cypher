// The oldest events past the retention cutoff, a batch at a time (the (at) index).
MATCH (e:AuditEvent)
WHERE e.at < $cutoff
WITH e ORDER BY e.at
LIMIT $batch
RETURN e.id AS id, e.chain AS chain, e.seq AS seq, e.mac AS mac
