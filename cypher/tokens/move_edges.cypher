// Dedup merge: the links of token $id move to token $into (never creating a self-link).
MATCH (t:Token {tenant_id: $tenant_id, id: $id}), (o:Token {tenant_id: $tenant_id, id: $into})
CALL (t, o) {
  MATCH (t)-[r:PARENT_OF]->(c) WHERE c <> o
  MERGE (o)-[n:PARENT_OF]->(c) ON CREATE SET n.created_at = r.created_at
}
CALL (t, o) {
  MATCH (p)-[r:PARENT_OF]->(t) WHERE p <> o
  MERGE (p)-[n:PARENT_OF]->(o) ON CREATE SET n.created_at = r.created_at
}
RETURN o.id AS id
