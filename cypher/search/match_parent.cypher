// Check for `parent:X` on a candidate `t` of search/frame: X, visible to the caller, links to t.
EXISTS {
  MATCH (p:Token {tenant_id: $tenant_id, id: $value})-[:PARENT_OF]->(t)
  WHERE @visible(p)
}
