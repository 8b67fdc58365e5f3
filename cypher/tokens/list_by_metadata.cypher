// A page of tokens by metadata. Each token holds one HAS_META self-loop per metadata entry,
// {tenant_id, kv: lower-cased key + U+001F + lower-cased value, token_id}, in a relationship
// range index: the first filter is a seek on (tenant_id, kv) read in token_id order and cut at
// the page size; the other filters are checked on each token's own entries. The hint keeps
// that seek whatever the statistics say: without it the planner, once the index held some
// thousands of entries, could read the whole index in order instead (an index scan filtered
// by tenant and entry, stopped by the limit: measured 36 ms of Neo4j CPU a page at 20,000
// tokens against 2.4 with the seek).
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
MATCH (t:Token)-[m:HAS_META]->(t) USING INDEX SEEK m:HAS_META(tenant_id, kv, token_id)
WHERE m.tenant_id = $tenant_id AND m.kv = $meta_kvs[0] AND m.token_id > $after
  AND @visible(t)
  AND ($types IS NULL OR t.type IN $types)
  AND all(kv IN $meta_kvs[1..] WHERE EXISTS { (t)-[x:HAS_META]->(t) WHERE x.kv = kv })
WITH t, m ORDER BY m.tenant_id, m.kv, m.token_id
LIMIT $limit
RETURN collect(@token(t)) AS tokens
