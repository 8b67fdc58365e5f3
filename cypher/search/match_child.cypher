// Check for `child:X` on a candidate `t` of search/frame: t links to X, visible to the caller.
EXISTS {
  MATCH (t)-[:PARENT_OF]->(k:Token {tenant_id: $tenant_id, id: $value})
  WHERE @visible(k)
}
