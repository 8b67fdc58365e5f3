// A page of tokens by id: one unique-index seek per requested id (the service passes each id
// once), then the other filters; only the requested ids are ever read, so the sort is small.
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
// The cursor is applied to the requested ids before the MATCH, so the only predicate on t.id is
// the equality and the planner cannot prefer a range seek over the tenant's ids (it did, on a
// new database whose statistics were near empty).
UNWIND $ids AS wanted
WITH wanted WHERE wanted > $after
MATCH (t:Token {tenant_id: $tenant_id, id: wanted})
WHERE @visible(t)
  AND ($types IS NULL OR t.type IN $types)
  AND all(kv IN $meta_kvs WHERE EXISTS { (t)-[m:HAS_META]->(t) WHERE m.kv = kv })
WITH t ORDER BY t.id
LIMIT $limit
RETURN collect(@token(t)) AS tokens
