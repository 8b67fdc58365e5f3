// Events of every tenant in a time range, oldest first, a page at a time from the cursor on (a
// range seek on the (at) index).
MATCH (e:AuditEvent)
WHERE e.at >= $since AND e.at < $until AND e.at >= $after_at
  AND (e.at > $after_at OR e.id > $after_id)
WITH e ORDER BY e.at, e.id
LIMIT $limit
RETURN properties(e) AS event
