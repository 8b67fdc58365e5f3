// Check for `ancestor:X` on a candidate `t` of search/frame: the same walk as search/seek_ancestor
// reaches t.
EXISTS {
  MATCH (a:Token {tenant_id: $tenant_id, id: $value})
  WHERE @visible(a)
  MATCH (a) ((:Token)-[:PARENT_OF]->(n:Token WHERE n.tenant_id = $tenant_id
      AND @visible(n))){1,5} (t)
}
