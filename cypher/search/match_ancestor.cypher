// Check for `ancestor:X` on a candidate `t` of search/frame: the same walk as search/seek_ancestor
// reaches t.
EXISTS {
  MATCH (a:Token {tenant_id: $tenant_id, id: $value})
  WHERE NOT coalesce(a.expires_at <= datetime(), false)
    AND any(c IN a.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
  MATCH (a) ((:Token)-[:PARENT_OF]->(n:Token WHERE n.tenant_id = $tenant_id
      AND NOT coalesce(n.expires_at <= datetime(), false)
      AND any(c IN n.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre)))){1,5} (t)
}
