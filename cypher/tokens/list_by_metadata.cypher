// A page of tokens by metadata. Each token holds one HAS_META self-loop per metadata entry,
// {tenant_id, kv: lower-cased key + U+001F + lower-cased value, token_id}, in a relationship
// range index: the first filter is a seek on (tenant_id, kv) read in token_id order and cut at
// the page size; the other filters are checked on each token's own entries.
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
MATCH (t:Token)-[m:HAS_META]->(t)
WHERE m.tenant_id = $tenant_id AND m.kv = $meta_kvs[0] AND m.token_id > $after
  AND @visible(t)
  AND ($types IS NULL OR t.type IN $types)
  AND all(kv IN $meta_kvs[1..] WHERE EXISTS { (t)-[x:HAS_META]->(t) WHERE x.kv = kv })
WITH t, m ORDER BY m.tenant_id, m.kv, m.token_id
LIMIT $limit
RETURN collect(@token(t)) AS tokens
