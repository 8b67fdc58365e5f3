// Check for `child:X` on a candidate `t` of search/frame: t links to X, visible to the caller.
EXISTS {
  MATCH (t)-[:PARENT_OF]->(k:Token {tenant_id: $tenant_id, id: $value})
  WHERE NOT coalesce(k.expires_at <= datetime(), false)
    AND any(c IN k.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
}
