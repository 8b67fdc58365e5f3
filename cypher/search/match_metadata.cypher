// Check for `metadata.<key>:X` on a candidate `t` of search/frame: one of its own HAS_META
// self-loops (see search/seek_metadata).
EXISTS { MATCH (t)-[m:HAS_META]->(t) WHERE m.kv = $value }
