// The blocks that settle one chain of write events (a seek on the index of what they settle).
MATCH (b:AuditBlock)
WHERE b.settles = $chain
RETURN properties(b) AS event
