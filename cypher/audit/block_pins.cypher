// The numbers the blocks stored before $until (microseconds since 1970) name in one chain of
// write events, for the pruner (a seek on the index of what blocks settle; their MACs are not
// read).
MATCH (b:AuditBlock)
WHERE b.settles = $chain AND b.at < $until
RETURN b.pins AS pins
