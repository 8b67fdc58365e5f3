// Check for `descendant:X` on a candidate `t` of search/frame: the same walk as
// search/seek_descendant reaches t.
EXISTS {
  MATCH (d:Token {tenant_id: $tenant_id, id: $value})
  WHERE NOT coalesce(d.expires_at <= datetime(), false)
    AND any(c IN d.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre))
  MATCH (t) ((n:Token WHERE n.tenant_id = $tenant_id
      AND NOT coalesce(n.expires_at <= datetime(), false)
      AND any(c IN n.containers WHERE any(pre IN $prefixes WHERE c STARTS WITH pre)))
      -[:PARENT_OF]->(:Token)){1,5} (d)
}
