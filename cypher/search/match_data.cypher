// Check for `data:X` on a candidate `t` of search/frame: one of its own HAS_INDEX self-loops
// holds the HMAC (see search/seek_data).
EXISTS { MATCH (t)-[x:HAS_INDEX]->(t) WHERE x.digest = $value }
