// Bulk load for the benchmark: the same node and metadata shape as cypher/tokens/create.cypher
// (metadata as HAS_META self-loops {tenant_id, kv, token_id}), many rows per transaction. Rows
// are prepared by bench.dataset with the service's own encryption and fingerprint code, and
// bench.run checks after loading that the service's own statements find them.
UNWIND $rows AS row
CREATE (t:Token {tenant_id: $tenant_id, id: row.id})
SET t += row.props, t.created_at = datetime(), t.expires_at = null
FOREACH (kv IN row.meta_kvs |
  CREATE (t)-[:HAS_META {tenant_id: $tenant_id, kv: kv, token_id: row.id}]->(t))
