// Bulk load for the benchmark: each customer's first token is the parent of the customer's
// other tokens (PARENT_OF, the edge cypher/graph/link.cypher makes), so a descendant search of a
// customer's first token has a page to find.
UNWIND $links AS l
MATCH (p:Token {tenant_id: $tenant_id, id: l.parent})
MATCH (c:Token {tenant_id: $tenant_id, id: l.child})
CREATE (p)-[:PARENT_OF {created_at: datetime()}]->(c)
