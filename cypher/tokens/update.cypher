// Write the merged token (locked by lock_for_update in the same transaction) and its metadata.
MATCH (t:Token {tenant_id: $tenant_id, id: $id})
SET t += $props, t.modified_at = datetime(), t.expires_at = $expires_at
WITH t
CALL (t) {
  MATCH (t)-[r:HAS_META]->()
  DELETE r
}
FOREACH (kv IN $meta_kvs |
  MERGE (m:Meta {tenant_id: $tenant_id, kv: kv})
  CREATE (t)-[:HAS_META]->(m))
RETURN properties(t) AS token
